"""SQLite backend: the embedded default, durable without a server.

All work runs on one dedicated thread that owns the connection, so the event loop never waits
on disk. Each state change is one ``BEGIN IMMEDIATE`` transaction that writes the record and
appends its event together; several proxy processes may share the file (they queue on the
write lock for up to ``busy_timeout_ms``). Expired records are invisible at once and deleted
now and then.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from idemproxy.store.clock import SteadyClock
from idemproxy.store.control import AgentControl, PauseRequest, written_pause
from idemproxy.store.decisions import (
    HELD_MS,
    ClaimStep,
    claim_step,
    claimed_record,
    expires_ms,
    holds,
    lease_lapsed,
    resolvable,
    resolved_record,
    settled_record,
)
from idemproxy.store.errors import StoreCorrupt, StoreUnavailable
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectRecord,
    EventType,
    Paused,
    RecordKey,
    ResolveRequest,
    ResolveResult,
    Settlement,
    Standing,
)
from idemproxy.store.retention import ARCHIVE_RETENTION_S, AUDIT_RETENTION_S, EVENT_RETENTION_S
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.sqlite import control, journal, safety, schema, worklist
from idemproxy.store.work import Forgotten, Work

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5_000
PURGE_INTERVAL_S = 60


class SQLiteStore:
    """The :class:`~idemproxy.store.protocols.Store` in one SQLite file.

    Events are kept ``event_retention_s``, then purged with expired records.
    """

    backend = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        event_retention_s: int = EVENT_RETENTION_S,
        create: bool = True,
    ) -> None:
        """Nothing is opened until the first call, and then on the store's own thread.

        ``create`` makes the file and its tables where there are none (a proxy); without it
        the first call raises :class:`~idemproxy.store.errors.StoreNotFound` instead (the CLI).
        """
        self._path = Path(path)
        self._create = create
        self._busy_timeout_ms = busy_timeout_ms
        self._retention_ms = event_retention_s * 1000
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="idemproxy-sqlite")
        self._closed = False
        # Touched only on the worker thread.
        self._db: sqlite3.Connection | None = None
        self._clock = SteadyClock()  # anchored in the file once it is open
        self._next_purge_ms = 0
        self._file: safety.FileIdentity | None = None  # of the file self._db has open

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreUnavailable("the sqlite store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._on_worker, fn)
        except sqlite3.OperationalError as exc:
            # Locked past busy_timeout, unreadable file, full disk: the store cannot serve now.
            raise StoreUnavailable(f"sqlite store {self._path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreCorrupt(f"sqlite store {self._path}: {exc}") from exc

    def _on_worker(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            db = schema.connect(self._path, self._busy_timeout_ms, create=self._create)
            try:
                self._clock = SteadyClock(schema.clock_offset(db))
            except BaseException:
                db.close()
                raise
            self._db = db
        return fn(self._db)

    def _now_ms(self) -> int:
        """The store's time; read on the worker thread, where the file's anchor is known."""
        return self._clock()

    def _write(self, db: sqlite3.Connection, fn: Callable[[int], T]) -> T:
        """Run ``fn(now_ms)`` in one immediate transaction: all of it is written or none."""
        db.execute("BEGIN IMMEDIATE")
        try:
            # Read the clock once the write lock is held, so times follow commit order.
            now_ms = self._now_ms()
            result = fn(now_ms)
            if now_ms >= self._next_purge_ms:
                schema.purge(db, now_ms, self._retention_ms)
                journal.purge(db, now_ms, AUDIT_RETENTION_S * 1000, ARCHIVE_RETENTION_S * 1000)
                control.purge(db, now_ms)
                self._next_purge_ms = now_ms + PURGE_INTERVAL_S * 1000
        except BaseException:
            # SQLite itself rolls back on some errors (a full disk, an I/O error).
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    async def ping(self) -> None:
        await self._run(lambda db: db.execute("SELECT 1").fetchone())

    async def now_ms(self) -> int:
        return await self._run(lambda db: self._now_ms())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Straight onto the worker, not through _run: closing must not open the file first.
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close_db)
        self._executor.shutdown(wait=True)

    def _close_db(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self._run(lambda db: self._write(db, lambda now: _claim(db, request, now)))

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        def settle(db: sqlite3.Connection, now_ms: int) -> bool:
            found = schema.load(db, key, now_ms)
            if found is None or not holds(found[0], fence):
                return False
            record = settled_record(found[0], settlement, now_ms)
            schema.save(db, record, expires_ms(record.state, now_ms, settlement.ttl_s))
            schema.append_event(db, record, settlement.event_type(), now_ms)
            if settlement.pause_after_failures > 0:
                control.count(db, key, fence, settlement, now_ms)
            return True

        return await self._run(lambda db: self._write(db, lambda now: settle(db, now)))

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        key, resolution = request.key, request.resolution

        def resolve(db: sqlite3.Connection, now_ms: int) -> ResolveResult:
            found = schema.load(db, key, now_ms)
            if found is None or not resolvable(found[0], request.expected, request.fence):
                return ResolveResult(resolved=False, record=found[0] if found else None)
            fence = schema.next_fence(db, key.agent, found[0].fence, now_ms)
            record = resolved_record(found[0], resolution, fence, now_ms)
            schema.save(db, record, now_ms + resolution.ttl_s * 1000)
            schema.append_event(db, record, EventType.RESOLVED, now_ms)
            if request.audit is not None:
                journal.append_audit(db, request.audit, now_ms)
            return ResolveResult(resolved=True, record=record)

        return await self._run(lambda db: self._write(db, lambda now: resolve(db, now)))

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        def renew(db: sqlite3.Connection, now_ms: int) -> bool:
            found = schema.load(db, key, now_ms)
            if found is None or not holds(found[0], fence):
                return False
            record = dataclasses.replace(found[0], lease_expires_ms=now_ms + lease_ms)
            schema.save(db, record, found[1])
            return True

        return await self._run(lambda db: self._write(db, lambda now: renew(db, now)))

    async def get(self, key: RecordKey) -> EffectRecord | None:
        found = await self._run(lambda db: schema.load(db, key, self._now_ms()))
        return found[0] if found else None

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        sql = (
            "WHERE agent = ? AND state = 'unknown' AND expires_ms > ?"
            " ORDER BY updated_ms, rowid LIMIT ?"
        )
        return await self._run(
            lambda db: schema.select(db, sql, (agent, self._now_ms(), max(limit, 0)))
        )

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        sql = "WHERE agent = ? AND batch = ? AND expires_ms > ? ORDER BY created_ms, rowid"
        return await self._run(lambda db: schema.select(db, sql, (agent, batch, self._now_ms())))

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        after_id = _event_id(after)
        return await self._run(lambda db: schema.read_events(db, agent, after_id, max(limit, 0)))

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        after_id = _event_id(after)
        sql = "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE agent = ? AND id > ? LIMIT ?)"
        return await self._run(
            lambda db: int(db.execute(sql, (agent, after_id, max(cap, 0))).fetchone()[0])
        )

    async def list_agents(self) -> list[str]:
        return await self._run(journal.list_agents)

    async def list_busy_agents(self, work: Work) -> list[str]:
        return await self._run(lambda db: worklist.list_busy(db, work))

    async def forget_agents(self) -> Forgotten:
        def forget(db: sqlite3.Connection, now_ms: int) -> Forgotten:
            return Forgotten(idle=worklist.forget_idle(db, now_ms))

        return await self._run(lambda db: self._write(db, lambda now: forget(db, now)))

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        def sweep(db: sqlite3.Connection, now_ms: int) -> list[EffectRecord]:
            where = (
                "WHERE agent = ? AND state = 'in_flight' AND lease_expires_ms <= ?"
                " AND expires_ms > ? ORDER BY lease_expires_ms, rowid LIMIT ?"
            )
            lapsed = schema.select(db, where, (agent, now_ms, now_ms, max(limit, 0)))
            return [_lapse(db, record, now_ms) for record in lapsed]

        return await self._run(lambda db: self._write(db, lambda now: sweep(db, now)))

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return await self._run(lambda db: journal.read_cursor(db, agent))

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        def write(db: sqlite3.Connection, now_ms: int) -> DeliveryCursor | None:
            if journal.read_cursor(db, agent).version != cursor.version:
                return None
            written = dataclasses.replace(cursor, version=cursor.version + 1)
            journal.write_cursor(db, agent, written)
            if audit is not None:
                journal.append_audit(db, audit, now_ms)
            return written

        return await self._run(lambda db: self._write(db, lambda now: write(db, now)))

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._run(
            lambda db: self._write(db, lambda now: journal.append_audit(db, entry, now))
        )

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        return await self._run(lambda db: journal.read_audit(db, agent, max(limit, 0)))

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        def clear(db: sqlite3.Connection, now_ms: int) -> list[str]:
            cleared = journal.delete_cleared(db, request, now_ms)
            if request.archive is not None:
                journal.save_archive(db, request.agent, request.batch, request.archive, now_ms)
            journal.append_audit(db, request.audit, now_ms)
            return cleared

        return await self._run(lambda db: self._write(db, lambda now: clear(db, now)))

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return await self._run(lambda db: journal.read_archive(db, agent, batch))

    async def read_control(self, agent: str) -> AgentControl:
        return await self._run(lambda db: control.load(db, agent))

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        def write(db: sqlite3.Connection, now_ms: int) -> AgentControl | None:
            current = control.load(db, request.agent)
            if current.version != request.version:
                return None
            written = written_pause(current, request, now_ms)
            control.save(db, request.agent, written, now_ms)
            journal.append_audit(db, request.audit, now_ms)
            return written

        return await self._run(lambda db: self._write(db, lambda now: write(db, now)))

    async def durability(self) -> Durability:
        return safety.durability(self._path)

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        def check(db: sqlite3.Connection) -> MarkerCheck:
            db = self._followed(db)
            return self._write(db, lambda now: safety.check(db, seen, now))

        return await self._run(check)

    def expect_marker(self, marker: Marker | None) -> None:
        return None  # nothing here is emptied under an open store: the checks see the file go

    def _followed(self, db: sqlite3.Connection) -> sqlite3.Connection:
        """The connection to the file now at the store's path, reopened if the file was
        replaced since it was opened: the marker is then checked where every other process
        sharing the path reads and writes, not in a file only this one still holds."""
        identity = safety.file_identity(self._path)
        if identity is not None and (self._file is None or identity == self._file):
            self._file = identity
            return db
        db.close()
        self._db = None
        db = self._db = schema.connect(self._path, self._busy_timeout_ms, create=self._create)
        self._file = safety.file_identity(self._path)
        return db

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self._run(
            lambda db: self._write(db, lambda now: safety.record_loss(db, kind, detail, now))
        )

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self._run(
            lambda db: self._write(
                db, lambda now: safety.acknowledge(db, loss_id, actor, note, now)
            )
        )

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self._run(lambda db: safety.read_log(db, limit))


def _event_id(after: str | None) -> int:
    """The row id an event id of this store stands for (0: before the first)."""
    if after is None:
        return 0
    if not (after.isascii() and after.isdigit()):
        raise ValueError(f"not an event id of the sqlite store: {after!r}")
    return int(after)


def _lapse(db: sqlite3.Connection, record: EffectRecord, now_ms: int) -> EffectRecord:
    """Turn an in-flight record whose lease ran out unknown, inside the caller's transaction."""
    record = lease_lapsed(record, now_ms)
    schema.save(db, record, HELD_MS)
    schema.append_event(db, record, EventType.UNKNOWN, now_ms)
    return record


def _claim(db: sqlite3.Connection, request: ClaimRequest, now_ms: int) -> ClaimResult:
    """The claim decision of :meth:`Store.claim`, inside the caller's transaction."""
    found = schema.load(db, request.key, now_ms)
    record = found[0] if found else None
    step = claim_step(record, request, now_ms)
    if record is not None and step is ClaimStep.LAPSE:
        record = _lapse(db, record, now_ms)
    if record is not None and step is ClaimStep.REPLAY:
        schema.append_event(db, record, EventType.REPLAYED, now_ms)
    if record is not None and step is not ClaimStep.TAKE:
        return Standing(record)
    pause = None if request.ignore_pause else control.load(db, request.key.agent).pause
    if pause is not None:
        return Paused(pause)
    fence = schema.next_fence(db, request.key.agent, record.fence if record else 0, now_ms)
    claimed = claimed_record(request, record, fence, now_ms)
    schema.save(db, claimed, HELD_MS)
    journal.register(db, request.key.agent)
    return Claimed(claimed.fence, first_attempt_ms=claimed.created_ms)
