"""The SQLite store's archives of outcomes (store/outcomes.py): a row per effect of a batch,
written in the transaction of the settle or resolve that starts the record's TTL.

::

    outcomes  one row per (agent, batch, effect_id): the outcome's JSON and when it was written

Added without a schema bump, like the fences: an older proxy ignores the table, and a file
without it gains it when opened.
"""

from __future__ import annotations

import sqlite3

from idemproxy.store.outcomes import (
    ARCHIVED_STATES,
    ArchivedOutcome,
    archived_outcome,
    decode_outcome,
    encode_outcome,
    in_order,
)
from idemproxy.store.records import EffectRecord

TABLES = (
    """CREATE TABLE IF NOT EXISTS outcomes (
        agent TEXT NOT NULL, batch TEXT NOT NULL, effect_id TEXT NOT NULL,
        outcome BLOB NOT NULL, ts_ms INTEGER NOT NULL,
        PRIMARY KEY (agent, batch, effect_id))""",
    "CREATE INDEX IF NOT EXISTS outcomes_age ON outcomes (ts_ms)",
)


def archive(db: sqlite3.Connection, record: EffectRecord, now_ms: int) -> None:
    """Keep the outcome of a record whose TTL starts now, over any earlier one of its key."""
    if record.state not in ARCHIVED_STATES:
        return
    db.execute(
        "INSERT OR REPLACE INTO outcomes (agent, batch, effect_id, outcome, ts_ms)"
        " VALUES (?, ?, ?, ?, ?)",
        (
            record.key.agent,
            record.meta.batch,
            record.key.effect_id,
            encode_outcome(archived_outcome(record)),
            now_ms,
        ),
    )


def drop(db: sqlite3.Connection, agent: str, batch: str, effect_id: str) -> None:
    """Forget the outcome of a freed record a recovery cleared."""
    db.execute(
        "DELETE FROM outcomes WHERE agent = ? AND batch = ? AND effect_id = ?",
        (agent, batch, effect_id),
    )


def read(db: sqlite3.Connection, agent: str, batch: str, since_ms: int) -> list[ArchivedOutcome]:
    """The batch's outcomes written at ``since_ms`` or later, oldest claim first."""
    rows = db.execute(
        "SELECT outcome FROM outcomes WHERE agent = ? AND batch = ? AND ts_ms >= ?",
        (agent, batch, since_ms),
    )
    return in_order([decode_outcome(bytes(row["outcome"])) for row in rows])


def purge(db: sqlite3.Connection, now_ms: int, archive_retention_ms: int) -> None:
    db.execute("DELETE FROM outcomes WHERE ts_ms < ?", (now_ms - archive_retention_ms,))
