"""In-process store for tests and demos: the reference semantics, nothing survives a restart."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from idemproxy.store.clock import SteadyClock
from idemproxy.store.control import (
    AgentControl,
    FailedAttempt,
    PauseRequest,
    auto_pause_audit,
    counted,
    written_pause,
)
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
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.memory.safety import MEMORY_DURABILITY, MemoryMarker
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectRecord,
    EventType,
    Paused,
    RecordKey,
    RecordState,
    ResolveRequest,
    ResolveResult,
    Settlement,
    Standing,
)
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.work import Forgotten, Work


class MemoryStore:
    backend = "memory"

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock_ms: Callable[[], int] = clock_ms or SteadyClock()
        self._records: dict[RecordKey, tuple[EffectRecord, int]] = {}  # record, expires_ms
        self._events: dict[str, list[EffectEvent]] = {}
        self._next_event = 0
        self._cursors: dict[str, DeliveryCursor] = {}
        self._audit: dict[str, list[AuditEntry]] = {}
        self._archives: dict[tuple[str, str], bytes] = {}
        self._controls: dict[str, AgentControl] = {}
        self._fences: dict[str, int] = {}  # the last fence handed out, per agent
        self._marker = MemoryMarker(self._clock_ms)

    def _next_fence(self, agent: str, above: int) -> int:
        """A fence above every fence the agent's keys ever had, expired records' included."""
        fence = self._fences[agent] = max(self._fences.get(agent, 0), above) + 1
        return fence

    async def ping(self) -> None:
        return None

    async def now_ms(self) -> int:
        return self._clock_ms()

    async def close(self) -> None:
        return None

    def _live(self, key: RecordKey, now_ms: int) -> EffectRecord | None:
        entry = self._records.get(key)
        if entry is None:
            return None
        record, expires_ms = entry
        if expires_ms <= now_ms:
            del self._records[key]
            return None
        return record

    def _emit(self, record: EffectRecord, type_: EventType, now_ms: int) -> None:
        self._next_event += 1
        response = record.response
        event = EffectEvent(
            event_id=f"{self._next_event:020d}",
            type=type_,
            key=record.key,
            meta=record.meta,
            status=response.status if response else 0,
            external_id=record.external_id,
            reason=record.reason,
            ts_ms=now_ms,
            state=record.state.value,
        )
        self._events.setdefault(record.key.agent, []).append(event)

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        now_ms = self._clock_ms()
        record = self._live(request.key, now_ms)
        step = claim_step(record, request, now_ms)
        if record is not None and step is ClaimStep.LAPSE:
            record = self._lapse(record, now_ms)
        if record is not None and step is ClaimStep.REPLAY:
            self._emit(record, EventType.REPLAYED, now_ms)
        if record is not None and step is not ClaimStep.TAKE:
            return Standing(record)
        pause = self._controls.get(request.key.agent, AgentControl()).pause
        if pause is not None and not request.ignore_pause:
            return Paused(pause)
        fence = self._next_fence(request.key.agent, record.fence if record else 0)
        claimed = claimed_record(request, record, fence, now_ms)
        self._records[request.key] = (claimed, HELD_MS)
        return Claimed(claimed.fence, first_attempt_ms=claimed.created_ms)

    def _lapse(self, record: EffectRecord, now_ms: int) -> EffectRecord:
        record = lease_lapsed(record, now_ms)
        self._records[record.key] = (record, HELD_MS)
        self._emit(record, EventType.UNKNOWN, now_ms)
        return record

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        now_ms = self._clock_ms()
        record = self._live(key, now_ms)
        if record is None or not holds(record, fence):
            return False
        record = settled_record(record, settlement, now_ms)
        self._records[key] = (record, expires_ms(record.state, now_ms, settlement.ttl_s))
        self._emit(record, settlement.event_type(), now_ms)
        if settlement.pause_after_failures > 0:
            self._count(key, fence, settlement, now_ms)
        return True

    def _count(self, key: RecordKey, fence: int, settlement: Settlement, now_ms: int) -> None:
        control = self._controls.get(key.agent, AgentControl())
        attempt = FailedAttempt(key.effect_id, fence)
        limit = settlement.pause_after_failures
        control, paused = counted(control, attempt, settlement.failure(), limit, now_ms)
        self._controls[key.agent] = control
        if paused and control.pause is not None:
            self._append_audit(auto_pause_audit(key.agent, control.pause.reason), now_ms)

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        key, resolution = request.key, request.resolution
        now_ms = self._clock_ms()
        record = self._live(key, now_ms)
        if record is None or not resolvable(record, request.expected, request.fence):
            return ResolveResult(resolved=False, record=record)
        fence = self._next_fence(key.agent, record.fence)
        record = resolved_record(record, resolution, fence, now_ms)
        self._records[key] = (record, now_ms + resolution.ttl_s * 1000)
        self._emit(record, EventType.RESOLVED, now_ms)
        if request.audit is not None:
            self._append_audit(request.audit, now_ms)
        return ResolveResult(resolved=True, record=record)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        now_ms = self._clock_ms()
        record = self._live(key, now_ms)
        if record is None or not holds(record, fence):
            return False
        record = dataclasses.replace(record, lease_expires_ms=now_ms + lease_ms)
        self._records[key] = (record, self._records[key][1])
        return True

    async def get(self, key: RecordKey) -> EffectRecord | None:
        return self._live(key, self._clock_ms())

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        now_ms = self._clock_ms()
        unknown = [
            record
            for key in list(self._records)
            if key.agent == agent
            and (record := self._live(key, now_ms)) is not None
            and record.state is RecordState.UNKNOWN
        ]
        unknown.sort(key=lambda record: record.updated_ms)
        return unknown[:limit]

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        now_ms = self._clock_ms()
        records = [
            record
            for key in list(self._records)
            if key.agent == agent
            and (record := self._live(key, now_ms)) is not None
            and record.meta.batch == batch
        ]
        records.sort(key=lambda record: record.created_ms)
        return records

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        events = self._events.get(agent, [])
        if after is not None:
            events = [event for event in events if event.event_id > after]
        return events[:limit]

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        return len(await self.read_events(agent, after, cap))

    async def list_agents(self) -> list[str]:
        now_ms = self._clock_ms()
        agents = {key.agent for key in list(self._records) if self._live(key, now_ms)}
        return sorted(agents | set(self._events) | set(self._audit))

    async def list_busy_agents(self, work: Work) -> list[str]:
        """Worked out from the records, so an agent leaves a worklist with its last work."""
        now_ms = self._clock_ms()
        busy = {
            key.agent
            for key in list(self._records)
            if (record := self._live(key, now_ms)) is not None
            and record.state in (RecordState.IN_FLIGHT, RecordState.UNKNOWN)
        }
        if work is Work.REVIEW:
            busy.update(agent for agent, c in self._controls.items() if c.pause is not None)
        else:
            for agent, events in self._events.items():
                acked = self._cursors.get(agent, DeliveryCursor()).acked
                if events and events[-1].event_id > acked:
                    busy.add(agent)
        return sorted(busy)

    async def forget_agents(self) -> Forgotten:
        return Forgotten()  # the worklists hold no entry of their own to drop

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        now_ms = self._clock_ms()
        lapsed = [
            record
            for key in list(self._records)
            if key.agent == agent
            and (record := self._live(key, now_ms)) is not None
            and record.state is RecordState.IN_FLIGHT
            and record.lease_expires_ms <= now_ms
        ]
        lapsed.sort(key=lambda record: record.lease_expires_ms)
        return [self._lapse(record, now_ms) for record in lapsed[: max(limit, 0)]]

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return self._cursors.get(agent, DeliveryCursor())

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        if self._cursors.get(agent, DeliveryCursor()).version != cursor.version:
            return None
        written = dataclasses.replace(cursor, version=cursor.version + 1)
        self._cursors[agent] = written
        if audit is not None:
            self._append_audit(audit, self._clock_ms())
        return written

    def _append_audit(self, entry: AuditEntry, now_ms: int) -> AuditEntry:
        self._next_event += 1
        entry = dataclasses.replace(entry, ts_ms=now_ms, entry_id=f"{self._next_event:020d}")
        self._audit.setdefault(entry.agent, []).append(entry)
        return entry

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return self._append_audit(entry, self._clock_ms())

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        entries = self._audit.get(agent, [])
        return entries[-limit:] if limit > 0 else []

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        agent, batch = request.agent, request.batch
        now_ms = self._clock_ms()
        cleared = []
        for item in request.records:
            key = RecordKey(agent, item.effect_id)
            record = self._live(key, now_ms)
            if (
                record is not None
                and record.state is RecordState.NOT_APPLIED
                and record.fence == item.fence
                and record.meta.batch == batch
            ):
                del self._records[key]
                cleared.append(item.effect_id)
        if request.archive is not None:
            self._archives[agent, batch] = request.archive
        self._append_audit(request.audit, now_ms)
        return cleared

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return self._archives.get((agent, batch))

    async def read_control(self, agent: str) -> AgentControl:
        return self._controls.get(agent, AgentControl())

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        control = self._controls.get(request.agent, AgentControl())
        if control.version != request.version:
            return None
        now_ms = self._clock_ms()
        control = self._controls[request.agent] = written_pause(control, request, now_ms)
        self._append_audit(request.audit, now_ms)
        return control

    async def durability(self) -> Durability:
        return MEMORY_DURABILITY

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        return self._marker.check(seen)

    def expect_marker(self, marker: Marker | None) -> None:
        return None  # nothing here is emptied under an open store: the checks see the file go

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return self._marker.record_loss(kind, detail)

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return self._marker.acknowledge(loss_id, actor, note)

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return self._marker.read_log(limit)
