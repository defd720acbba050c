"""SQLite backend: the embedded default, durable without a server.

One part per protocol (store/protocols.py), each running on the one file (store/sqlite/file.py);
the store is their union. Events are kept ``event_retention_s``, then purged with expired
records.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from idemproxy.store.control import AgentControl, PauseRequest
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectRecord,
    RecordKey,
    ResolveRequest,
    ResolveResult,
    Settlement,
)
from idemproxy.store.retention import ARCHIVE_RETENTION_S, AUDIT_RETENTION_S, EVENT_RETENTION_S
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.sqlite import control, journal, rows, schema
from idemproxy.store.sqlite.control import SQLiteControl
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.sqlite.journal import SQLiteJournal
from idemproxy.store.sqlite.records import SQLiteRecords
from idemproxy.store.sqlite.safety import SQLiteSafety
from idemproxy.store.work import Forgotten, Work

BUSY_TIMEOUT_MS = 5_000


class SQLiteStore:
    """The :class:`~idemproxy.store.protocols.Store` in one SQLite file."""

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
        path = Path(path)
        connect = functools.partial(schema.connect, path, busy_timeout_ms, create=create)
        purge = functools.partial(_purge, retention_ms=event_retention_s * 1000)
        self._file = file = SQLiteFile(path, connect, purge)
        self.records = SQLiteRecords(file)
        self.journal = SQLiteJournal(file)
        self.control = SQLiteControl(file)
        self.safety = SQLiteSafety(file)

    async def ping(self) -> None:
        await self._file.run(lambda db: db.execute("SELECT 1").fetchone())

    async def now_ms(self) -> int:
        return await self._file.read(lambda db, now_ms: now_ms)

    async def close(self) -> None:
        await self._file.close()

    # RecordStore

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self.records.claim(request)

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        return await self.records.settle(key, fence, settlement)

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        return await self.records.resolve(request)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        return await self.records.renew(key, fence, lease_ms)

    async def get(self, key: RecordKey) -> EffectRecord | None:
        return await self.records.get(key)

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self.records.list_unknown(agent, limit)

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        return await self.records.batch_records(agent, batch)

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self.records.sweep_expired(agent, limit)

    # Journal

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        return await self.journal.read_events(agent, after, limit)

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        return await self.journal.count_events(agent, after, cap)

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return await self.journal.read_cursor(agent)

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        return await self.journal.write_cursor(agent, cursor, audit)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self.journal.append_audit(entry)

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        return await self.journal.read_audit(agent, limit)

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        return await self.journal.clear_batch(request)

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return await self.journal.read_archive(agent, batch)

    # Control

    async def read_control(self, agent: str) -> AgentControl:
        return await self.control.read_control(agent)

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        return await self.control.write_pause(request)

    async def list_agents(self) -> list[str]:
        return await self.control.list_agents()

    async def list_busy_agents(self, work: Work) -> list[str]:
        return await self.control.list_busy_agents(work)

    async def forget_agents(self) -> Forgotten:
        return await self.control.forget_agents()

    # Safety

    async def durability(self) -> Durability:
        return await self.safety.durability()

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        return await self.safety.check_marker(seen)

    def expect_marker(self, marker: Marker | None) -> None:
        self.safety.expect_marker(marker)

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self.safety.record_loss(kind, detail)

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self.safety.acknowledge_loss(loss_id, actor, note)

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self.safety.read_store_log(limit)


def _purge(db: sqlite3.Connection, now_ms: int, retention_ms: int) -> None:
    """Delete what is past its retention: records, events, fences, then the ledger's rows."""
    rows.purge(db, now_ms, retention_ms)
    journal.purge(db, now_ms, AUDIT_RETENTION_S * 1000, ARCHIVE_RETENTION_S * 1000)
    control.purge(db, now_ms)
