"""The SQLite store's worklists (:mod:`idemproxy.store.work`); called only on the store's own
thread, inside its transactions::

    busy  one row per agent on the worklist of each kind of work

An agent is listed in the transaction of the change that gives it work (a claim, an event, a
pause, an approval asked for), and dropped in one that finds it has none left, so no listing
needs a grace.
"""

from __future__ import annotations

import sqlite3

from idemproxy.store.work import Work

TABLES = (
    """CREATE TABLE IF NOT EXISTS busy (
        work TEXT NOT NULL, agent TEXT NOT NULL, PRIMARY KEY (work, agent)) WITHOUT ROWID""",
)

# Spliced into the statements below (hence the S608 waivers): constants, never user input.
_RECORDS = (
    "EXISTS (SELECT 1 FROM records r WHERE r.agent = busy.agent"
    " AND r.state IN ('in_flight', 'unknown') AND r.expires_ms > ?)"
)
_PAUSED = "EXISTS (SELECT 1 FROM controls c WHERE c.agent = busy.agent AND c.paused != '')"
_APPROVALS = (
    "EXISTS (SELECT 1 FROM approvals a WHERE a.agent = busy.agent"
    " AND a.state IN ('awaiting_approval', 'approved'))"
)
_WAITING = (
    "EXISTS (SELECT 1 FROM events e WHERE e.agent = busy.agent AND e.id > COALESCE("
    "(SELECT CAST(c.acked AS INTEGER) FROM cursors c WHERE c.agent = busy.agent), 0))"
)


def add(db: sqlite3.Connection, agent: str, *works: Work) -> None:
    """List the agent on the worklists of ``works`` (a no-op where it is listed)."""
    db.executemany(
        "INSERT OR IGNORE INTO busy (work, agent) VALUES (?, ?)",
        [(work.value, agent) for work in works],
    )


def list_busy(db: sqlite3.Connection, work: Work) -> list[str]:
    rows = db.execute("SELECT agent FROM busy WHERE work = ? ORDER BY agent", (work.value,))
    return [row["agent"] for row in rows]


def forget_idle(db: sqlite3.Connection, now_ms: int) -> int:
    """Drop every listed agent that has no such work left; returns how many rows went."""
    review = db.execute(
        f"DELETE FROM busy WHERE work = ? AND NOT {_RECORDS} AND NOT {_PAUSED}",  # noqa: S608
        (Work.REVIEW.value, now_ms),
    )
    delivery = db.execute(
        f"DELETE FROM busy WHERE work = ? AND NOT {_RECORDS} AND NOT {_WAITING}",  # noqa: S608
        (Work.DELIVERY.value, now_ms),
    )
    approval = db.execute(
        f"DELETE FROM busy WHERE work = ? AND NOT {_APPROVALS}",  # noqa: S608
        (Work.APPROVAL.value,),
    )
    return review.rowcount + delivery.rowcount + approval.rowcount


def backfill(db: sqlite3.Connection) -> None:
    """List every agent of a file written before the worklists existed on both of them; the
    sweep's first :func:`forget_idle` drops those with nothing to do."""
    db.execute(
        "INSERT OR IGNORE INTO busy (work, agent)"
        " SELECT w.work, a.agent FROM (SELECT ? AS work UNION SELECT ?) w,"
        " (SELECT agent FROM agents UNION SELECT agent FROM controls) a",
        (Work.REVIEW.value, Work.DELIVERY.value),
    )
