"""The SQLite store's approvals (store/approvals.py); called only on the store's own thread,
inside its transactions::

    approvals  one row per (agent, approval_id): the approval, and ``expires_ms`` once it is
               settled (NULL while it is open, which no purge reaches)

Each step reads the row, decides with store/approvals.py's functions and writes the row, its
events and (a decision) its audit entry in one transaction.
"""

from __future__ import annotations

import sqlite3

from idemproxy.store.approvals import (
    Approval,
    ApprovalState,
    Change,
    DecideRequest,
    HoldRequest,
    approval_extra,
    decided,
    expires_ms,
    held,
    lapsed,
    take_answer,
    taken,
)
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import RecordKey
from idemproxy.store.sqlite import journal, rows, worklist
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.work import Work

TABLES = (
    """CREATE TABLE IF NOT EXISTS approvals (
        agent TEXT NOT NULL, approval_id TEXT NOT NULL, effect_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL, batch TEXT NOT NULL, tool_call TEXT NOT NULL,
        action TEXT NOT NULL, upstream TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL,
        state TEXT NOT NULL, rule TEXT NOT NULL, summary TEXT NOT NULL,
        requested_ms INTEGER NOT NULL, decided_ms INTEGER NOT NULL,
        valid_until_ms INTEGER NOT NULL, actor TEXT NOT NULL, note TEXT NOT NULL,
        keep_ms INTEGER NOT NULL, requests INTEGER NOT NULL, valid_ms INTEGER NOT NULL,
        expires_ms INTEGER,
        PRIMARY KEY (agent, approval_id))""",
    "CREATE INDEX IF NOT EXISTS approvals_open ON approvals (agent, state, requested_ms)",
    "CREATE INDEX IF NOT EXISTS approvals_expiry ON approvals (expires_ms)",
)

_COLUMNS = (
    "agent, approval_id, effect_id, fingerprint, batch, tool_call, action, upstream, method,"
    " path, state, rule, summary, requested_ms, decided_ms, valid_until_ms, actor, note,"
    " keep_ms, requests, valid_ms, expires_ms"
)
# Spliced into the statements below (hence the S608 waivers): constants, never user input.
_LIVE = "(expires_ms IS NULL OR expires_ms > ?)"
_OPEN = "state IN ('awaiting_approval', 'approved')"


def load(db: sqlite3.Connection, agent: str, approval_id: str, now_ms: int) -> Approval | None:
    """The approval as it stands; one settled and kept no longer counts as absent."""
    row = db.execute(
        f"SELECT * FROM approvals WHERE agent = ? AND approval_id = ? AND {_LIVE}",  # noqa: S608
        (agent, approval_id, now_ms),
    ).fetchone()
    return decode(row) if row is not None else None


def open_approvals(
    db: sqlite3.Connection, agent: str, now_ms: int, limit: int | None = None
) -> list[Approval]:
    """The agent's open approvals, oldest request first (all of them without ``limit``)."""
    found = db.execute(
        f"SELECT * FROM approvals WHERE agent = ? AND {_OPEN} AND {_LIVE}"  # noqa: S608
        " ORDER BY requested_ms, approval_id LIMIT ?",
        (agent, now_ms, -1 if limit is None else max(limit, 0)),
    )
    return [decode(row) for row in found]


def write(db: sqlite3.Connection, change: Change, now_ms: int) -> Approval:
    """Save the approval as the change leaves it and append its events; an open one keeps its
    agent on the approvals' worklist (the events put it on delivery's)."""
    approval = change.approval
    key, meta = approval.key, approval.meta
    if approval.open:
        worklist.add(db, key.agent, Work.APPROVAL)
    db.execute(
        f"INSERT OR REPLACE INTO approvals ({_COLUMNS})"  # noqa: S608
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key.agent,
            approval.approval_id,
            key.effect_id,
            approval.fingerprint,
            meta.batch,
            meta.tool_call,
            meta.action,
            meta.upstream,
            meta.method,
            meta.path,
            approval.state.value,
            approval.rule,
            approval.summary,
            approval.requested_ms,
            approval.decided_ms,
            approval.valid_until_ms,
            approval.actor,
            approval.note,
            approval.keep_ms,
            approval.requests,
            approval.valid_ms,
            expires_ms(approval, now_ms),
        ),
    )
    for type_ in change.events:
        told = change.told(type_)
        extra, state = approval_extra(told), told.state.value
        rows.append_extra_event(db, type_, key, meta, told.note, state, extra, now_ms)
    return approval


def decode(row: sqlite3.Row) -> Approval:
    """An approval from its row; :class:`StoreCorrupt` if a value is not what was written."""
    try:
        return Approval(
            approval_id=row["approval_id"],
            key=RecordKey(row["agent"], row["effect_id"]),
            fingerprint=row["fingerprint"],
            meta=rows.meta_of(row),
            state=ApprovalState(row["state"]),
            rule=row["rule"],
            summary=row["summary"],
            requested_ms=row["requested_ms"],
            decided_ms=row["decided_ms"],
            valid_until_ms=row["valid_until_ms"],
            actor=row["actor"],
            note=row["note"],
            keep_ms=row["keep_ms"],
            requests=row["requests"],
            valid_ms=row["valid_ms"],
        )
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"approval {row['agent']}/{row['approval_id']}: {exc}") from exc


def purge(db: sqlite3.Connection, now_ms: int) -> None:
    """Delete the settled approvals kept long enough."""
    db.execute("DELETE FROM approvals WHERE expires_ms <= ?", (now_ms,))


class SQLiteApprovals:
    """The :class:`~idemproxy.store.protocols.Approvals` on the approvals table."""

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file

    async def hold(self, request: HoldRequest) -> Approval:
        def hold(db: sqlite3.Connection, now_ms: int) -> Approval:
            agent = request.key.agent
            found = load(db, agent, request.approval_id, now_ms)
            change = held(found, request, now_ms)
            if change is None:
                assert found is not None  # held() opens one where there is none
                return found
            db.execute("INSERT OR IGNORE INTO agents (agent) VALUES (?)", (agent,))
            return write(db, change, now_ms)

        return await self._file.write(hold)

    async def decide(self, request: DecideRequest) -> Approval | None:
        def decide(db: sqlite3.Connection, now_ms: int) -> Approval | None:
            found = load(db, request.agent, request.approval_id, now_ms)
            change = decided(found, request, now_ms)
            if change is None:
                return None
            journal.append_audit(db, request.audit, now_ms)
            return write(db, change, now_ms)

        return await self._file.write(decide)

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        def take(db: sqlite3.Connection, now_ms: int) -> Approval | None:
            found = load(db, agent, approval_id, now_ms)
            change = taken(found, now_ms)
            if change is not None:
                write(db, change, now_ms)
            return take_answer(found, change)

        return await self._file.write(take)

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        return await self._file.read(lambda db, now_ms: load(db, agent, approval_id, now_ms))

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        return await self._file.read(lambda db, now_ms: open_approvals(db, agent, now_ms, limit))

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        def expire(db: sqlite3.Connection, now_ms: int) -> list[Approval]:
            expired: list[Approval] = []
            for approval in open_approvals(db, agent, now_ms):
                change = lapsed(approval, now_ms)
                if change is not None and len(expired) < limit:
                    expired.append(write(db, change, now_ms))
            return expired

        return await self._file.write(expire)
