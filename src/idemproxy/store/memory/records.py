"""The memory store's effect records (:class:`~idemproxy.store.protocols.RecordStore`)."""

from __future__ import annotations

import dataclasses

from idemproxy.store.control import FailedAttempt, auto_pause_audit, counted
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
from idemproxy.store.memory.tables import MemoryTables
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    ClaimResult,
    EffectMeta,
    EffectRecord,
    EventType,
    Paused,
    RecordKey,
    RecordState,
    Refused,
    Resolved,
    ResolveRequest,
    ResolveResult,
    Settlement,
    Standing,
)


class MemoryRecords:
    backend = "memory"

    def __init__(self, tables: MemoryTables) -> None:
        self._tables = tables

    async def ping(self) -> None:
        return None

    async def now_ms(self) -> int:
        return self._tables.clock_ms()

    async def close(self) -> None:
        return None

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        tables, now_ms = self._tables, self._tables.clock_ms()
        record = tables.live(request.key, now_ms)
        step = claim_step(record, request, now_ms)
        if record is not None and step is ClaimStep.LAPSE:
            record = self._lapse(record, now_ms)
        if record is not None and step is ClaimStep.REPLAY:
            tables.emit(record, EventType.REPLAYED, now_ms)
        if record is not None and step is not ClaimStep.TAKE:
            return Standing(record, lapsed=step is ClaimStep.LAPSE)
        pause = tables.control(request.key.agent).pause
        if pause is not None and not request.ignore_pause:
            return Paused(pause)
        fence = tables.next_fence(request.key.agent, record.fence if record else 0)
        claimed = claimed_record(request, record, fence, now_ms)
        tables.records[request.key] = (claimed, HELD_MS)
        return Claimed(claimed.fence, first_attempt_ms=claimed.created_ms)

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        tables, now_ms = self._tables, self._tables.clock_ms()
        record = tables.live(key, now_ms)
        if record is None or not holds(record, fence):
            return False
        record = settled_record(record, settlement, now_ms)
        tables.records[key] = (record, expires_ms(record.state, now_ms, settlement.ttl_s))
        tables.archive_outcome(record, now_ms)
        tables.emit(record, settlement.event_type(), now_ms)
        if settlement.pause_after_failures > 0:
            self._count(key, fence, settlement, now_ms)
        return True

    def _count(self, key: RecordKey, fence: int, settlement: Settlement, now_ms: int) -> None:
        attempt = FailedAttempt(key.effect_id, fence)
        limit = settlement.pause_after_failures
        control = self._tables.control(key.agent)
        control, paused = counted(control, attempt, settlement.failure(), limit, now_ms)
        self._tables.controls[key.agent] = control
        if paused and control.pause is not None:
            self._tables.append_audit(auto_pause_audit(key.agent, control.pause.reason), now_ms)
            record = self._tables.live(key, now_ms)
            meta = record.meta if record is not None else EffectMeta()
            self._tables.emit_agent(
                EventType.AGENT_PAUSED, key, meta, control.pause.reason, "paused", now_ms
            )

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        tables, now_ms = self._tables, self._tables.clock_ms()
        key, resolution = request.key, request.resolution
        record = tables.live(key, now_ms)
        if record is None or not resolvable(record, request.expected, request.fence):
            return Refused(record)
        fence = tables.next_fence(key.agent, record.fence)
        record = resolved_record(record, resolution, fence, now_ms)
        tables.records[key] = (record, now_ms + resolution.ttl_s * 1000)
        tables.archive_outcome(record, now_ms)
        tables.emit(record, EventType.RESOLVED, now_ms)
        if request.audit is not None:
            tables.append_audit(request.audit, now_ms)
        return Resolved(record)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        tables, now_ms = self._tables, self._tables.clock_ms()
        record = tables.live(key, now_ms)
        if record is None or not holds(record, fence):
            return False
        record = dataclasses.replace(record, lease_expires_ms=now_ms + lease_ms)
        tables.records[key] = (record, tables.records[key][1])
        return True

    async def get(self, key: RecordKey) -> EffectRecord | None:
        return self._tables.live(key, self._tables.clock_ms())

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        records = self._tables.live_records(agent, self._tables.clock_ms())
        unknown = [record for record in records if record.state is RecordState.UNKNOWN]
        unknown.sort(key=lambda record: record.updated_ms)
        return unknown[:limit]

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        records = self._tables.live_records(agent, self._tables.clock_ms())
        listed = [record for record in records if record.meta.batch == batch]
        listed.sort(key=lambda record: record.created_ms)
        return listed

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        now_ms = self._tables.clock_ms()
        lapsed = [
            record
            for record in self._tables.live_records(agent, now_ms)
            if record.state is RecordState.IN_FLIGHT and record.lease_expires_ms <= now_ms
        ]
        lapsed.sort(key=lambda record: record.lease_expires_ms)
        return [self._lapse(record, now_ms) for record in lapsed[: max(limit, 0)]]

    def _lapse(self, record: EffectRecord, now_ms: int) -> EffectRecord:
        record = lease_lapsed(record, now_ms)
        self._tables.records[record.key] = (record, HELD_MS)
        self._tables.emit(record, EventType.UNKNOWN, now_ms)
        return record
