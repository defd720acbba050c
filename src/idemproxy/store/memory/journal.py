"""The memory store's outbox, delivery cursors, audit log and archives
(:class:`~idemproxy.store.protocols.Journal`)."""

from __future__ import annotations

import dataclasses

from idemproxy.store.control import abandon_reason
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.memory.tables import MemoryTables
from idemproxy.store.outcomes import ArchivedOutcome, in_order
from idemproxy.store.records import EffectEvent, EffectMeta, EventType, RecordKey, RecordState


class MemoryJournal:
    def __init__(self, tables: MemoryTables) -> None:
        self._tables = tables

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        events = self._tables.events.get(agent, [])
        if after is not None:
            events = [event for event in events if event.event_id > after]
        return events[:limit]

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        return len(await self.read_events(agent, after, cap))

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return self._tables.cursors.get(agent, DeliveryCursor())

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        tables = self._tables
        if tables.cursors.get(agent, DeliveryCursor()).version != cursor.version:
            return None
        written = dataclasses.replace(cursor, version=cursor.version + 1)
        tables.cursors[agent] = written
        if audit is not None:
            tables.append_audit(audit, tables.clock_ms())
        return written

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return self._tables.append_audit(entry, self._tables.clock_ms())

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        entries = self._tables.audit.get(agent, [])
        return entries[-limit:] if limit > 0 else []

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        tables, now_ms = self._tables, self._tables.clock_ms()
        agent, batch = request.agent, request.batch
        cleared = []
        for item in request.records:
            key = RecordKey(agent, item.effect_id)
            record = tables.live(key, now_ms)
            if (
                record is not None
                and record.state is RecordState.NOT_APPLIED
                and record.fence == item.fence
                and record.meta.batch == batch
            ):
                del tables.records[key]
                tables.live_outcomes(agent, batch, now_ms).pop(item.effect_id, None)
                cleared.append(item.effect_id)
        if request.archive is not None:
            tables.archives[agent, batch] = request.archive
            reason = abandon_reason(request.audit)
            meta = EffectMeta(batch=batch)
            key = RecordKey(agent, "")
            tables.emit_agent(EventType.BATCH_ABANDONED, key, meta, reason, "abandoned", now_ms)
        tables.append_audit(request.audit, now_ms)
        return cleared

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return self._tables.archives.get((agent, batch))

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        outcomes = self._tables.live_outcomes(agent, batch, self._tables.clock_ms())
        return in_order(list(outcomes.values()))
