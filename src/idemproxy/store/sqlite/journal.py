"""Tables of the SQLite store beside the records: delivery cursors, audit log, batch archives.

Called only on the store's own thread, inside its transactions::

    agents    every agent that has claimed a record, so listing them reads no big table
    cursors   one row per agent: where delivery to the recovery controller stands
    audit     operator actions; ``id`` (AUTOINCREMENT) is the entry id, printed like event ids
    archives  one row per (agent, batch) that was abandoned: the records as they stood
"""

from __future__ import annotations

import dataclasses
import sqlite3

from idemproxy.store.control import abandon_reason
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.records import EffectEvent, EffectMeta, EventType, RecordKey
from idemproxy.store.retention import Retention
from idemproxy.store.sqlite import outcomes, rows, worklist
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.work import Work

TABLES = (
    "CREATE TABLE IF NOT EXISTS agents (agent TEXT PRIMARY KEY) WITHOUT ROWID",
    """CREATE TABLE IF NOT EXISTS cursors (
        agent TEXT PRIMARY KEY, version INTEGER NOT NULL, acked TEXT NOT NULL,
        owner TEXT NOT NULL, lease_expires_ms INTEGER NOT NULL, attempts INTEGER NOT NULL,
        retry_at_ms INTEGER NOT NULL, last_error TEXT NOT NULL, parked_ms INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, action TEXT NOT NULL,
        actor TEXT NOT NULL, target TEXT NOT NULL, before TEXT NOT NULL, after TEXT NOT NULL,
        note TEXT NOT NULL, ts_ms INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS audit_agent ON audit (agent, id)",
    "CREATE INDEX IF NOT EXISTS audit_age ON audit (ts_ms)",
    """CREATE TABLE IF NOT EXISTS archives (
        agent TEXT NOT NULL, batch TEXT NOT NULL, doc BLOB NOT NULL, ts_ms INTEGER NOT NULL,
        PRIMARY KEY (agent, batch))""",
)

_CURSOR_COLUMNS = (
    "version, acked, owner, lease_expires_ms, attempts, retry_at_ms, last_error, parked_ms"
)


def read_cursor(db: sqlite3.Connection, agent: str) -> DeliveryCursor:
    """The agent's cursor, or a fresh one."""
    row = db.execute(
        f"SELECT {_CURSOR_COLUMNS} FROM cursors WHERE agent = ?",  # noqa: S608
        (agent,),
    ).fetchone()
    if row is None:
        return DeliveryCursor()
    return DeliveryCursor(
        acked=row["acked"],
        owner=row["owner"],
        lease_expires_ms=row["lease_expires_ms"],
        attempts=row["attempts"],
        retry_at_ms=row["retry_at_ms"],
        last_error=row["last_error"],
        parked_ms=row["parked_ms"],
        version=row["version"],
    )


def write_cursor(db: sqlite3.Connection, agent: str, cursor: DeliveryCursor) -> None:
    """Insert or overwrite the agent's cursor exactly as given (version included)."""
    db.execute(
        f"INSERT OR REPLACE INTO cursors (agent, {_CURSOR_COLUMNS})"  # noqa: S608
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            agent,
            cursor.version,
            cursor.acked,
            cursor.owner,
            cursor.lease_expires_ms,
            cursor.attempts,
            cursor.retry_at_ms,
            cursor.last_error,
            cursor.parked_ms,
        ),
    )


def append_audit(db: sqlite3.Connection, entry: AuditEntry, now_ms: int) -> AuditEntry:
    """Append ``entry`` stamped with ``now_ms``; returns it with its id."""
    cursor = db.execute(
        "INSERT INTO audit (agent, action, actor, target, before, after, note, ts_ms)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.agent,
            entry.action,
            entry.actor,
            entry.target,
            entry.before,
            entry.after,
            entry.note,
            now_ms,
        ),
    )
    return dataclasses.replace(entry, ts_ms=now_ms, entry_id=f"{cursor.lastrowid:020d}")


def read_audit(db: sqlite3.Connection, agent: str, limit: int) -> list[AuditEntry]:
    """The agent's newest ``limit`` entries, oldest first."""
    rows = db.execute(
        "SELECT * FROM (SELECT * FROM audit WHERE agent = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
        (agent, limit),
    )
    return [audit_entry(row) for row in rows]


def audit_entry(row: sqlite3.Row) -> AuditEntry:
    """An entry from its row (the store's own log has the same columns but the agent)."""
    return AuditEntry(
        agent=row["agent"],
        action=row["action"],
        actor=row["actor"],
        target=row["target"],
        before=row["before"],
        after=row["after"],
        note=row["note"],
        ts_ms=row["ts_ms"],
        entry_id=f"{row['id']:020d}",
    )


def save_archive(db: sqlite3.Connection, agent: str, batch: str, doc: bytes, now_ms: int) -> None:
    db.execute(
        "INSERT OR REPLACE INTO archives (agent, batch, doc, ts_ms) VALUES (?, ?, ?, ?)",
        (agent, batch, doc, now_ms),
    )


def read_archive(db: sqlite3.Connection, agent: str, batch: str) -> bytes | None:
    row = db.execute(
        "SELECT doc FROM archives WHERE agent = ? AND batch = ?", (agent, batch)
    ).fetchone()
    return bytes(row["doc"]) if row is not None else None


def register(db: sqlite3.Connection, agent: str) -> None:
    """List the agent and put it on the worklists (a no-op where it is listed), in the
    transaction of its claim."""
    db.execute("INSERT OR IGNORE INTO agents (agent) VALUES (?)", (agent,))
    worklist.add(db, agent, Work.REVIEW, Work.DELIVERY)


def backfill(db: sqlite3.Connection) -> None:
    """List the agents of a file written before the agents table existed."""
    db.execute(
        "INSERT OR IGNORE INTO agents (agent)"
        " SELECT DISTINCT agent FROM records UNION SELECT DISTINCT agent FROM events"
    )


def list_agents(db: sqlite3.Connection) -> list[str]:
    return [row["agent"] for row in db.execute("SELECT agent FROM agents ORDER BY agent")]


def delete_cleared(db: sqlite3.Connection, request: ClearRequest, now_ms: int) -> list[str]:
    """Delete each listed record of the batch that is still ``not_applied`` at its fence."""
    agent, batch = request.agent, request.batch
    deleted = []
    for item in request.records:
        cursor = db.execute(
            "DELETE FROM records WHERE agent = ? AND effect_id = ? AND batch = ?"
            " AND state = 'not_applied' AND fence = ? AND expires_ms > ?",
            (agent, item.effect_id, batch, item.fence, now_ms),
        )
        if cursor.rowcount:
            outcomes.drop(db, agent, batch, item.effect_id)
            deleted.append(item.effect_id)
    return deleted


def purge(
    db: sqlite3.Connection, now_ms: int, retention_ms: int, archive_retention_ms: int
) -> None:
    """Delete audit entries and archives past their retention, then the agents with nothing
    left (run after the records and events are purged)."""
    db.execute("DELETE FROM audit WHERE ts_ms < ?", (now_ms - retention_ms,))
    db.execute("DELETE FROM archives WHERE ts_ms < ?", (now_ms - archive_retention_ms,))
    db.execute(
        "DELETE FROM agents WHERE NOT EXISTS (SELECT 1 FROM records WHERE agent = agents.agent)"
        " AND NOT EXISTS (SELECT 1 FROM events WHERE agent = agents.agent)"
        " AND NOT EXISTS (SELECT 1 FROM audit WHERE agent = agents.agent)"
    )


class SQLiteJournal:
    """The :class:`~idemproxy.store.protocols.Journal` on these tables and the outbox."""

    def __init__(self, file: SQLiteFile, retention: Retention) -> None:
        self._file = file
        self._archive_ms = retention.archive_ms

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        after_id = _event_id(after)
        return await self._file.run(lambda db: rows.read_events(db, agent, after_id, max(limit, 0)))

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        after_id = _event_id(after)
        sql = "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE agent = ? AND id > ? LIMIT ?)"
        return await self._file.run(
            lambda db: int(db.execute(sql, (agent, after_id, max(cap, 0))).fetchone()[0])
        )

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return await self._file.run(lambda db: read_cursor(db, agent))

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        def write(db: sqlite3.Connection, now_ms: int) -> DeliveryCursor | None:
            if read_cursor(db, agent).version != cursor.version:
                return None
            written = dataclasses.replace(cursor, version=cursor.version + 1)
            write_cursor(db, agent, written)
            if audit is not None:
                append_audit(db, audit, now_ms)
            return written

        return await self._file.write(write)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._file.write(lambda db, now_ms: append_audit(db, entry, now_ms))

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        return await self._file.run(lambda db: read_audit(db, agent, max(limit, 0)))

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        def clear(db: sqlite3.Connection, now_ms: int) -> list[str]:
            cleared = delete_cleared(db, request, now_ms)
            if request.archive is not None:
                save_archive(db, request.agent, request.batch, request.archive, now_ms)
                rows.append_agent_event(
                    db,
                    EventType.BATCH_ABANDONED,
                    RecordKey(request.agent, ""),
                    EffectMeta(batch=request.batch),
                    abandon_reason(request.audit),
                    "abandoned",
                    now_ms,
                )
            append_audit(db, request.audit, now_ms)
            return cleared

        return await self._file.write(clear)

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return await self._file.run(lambda db: read_archive(db, agent, batch))

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        # Those the purge has not reached yet count as gone, as on the other stores.
        return await self._file.read(
            lambda db, now_ms: outcomes.read(db, agent, batch, now_ms - self._archive_ms)
        )


def _event_id(after: str | None) -> int:
    """The row id an event id of this store stands for (0: before the first)."""
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit()):
        raise ValueError(f"not an event id of the sqlite store: {after!r}")
    return int(after)
