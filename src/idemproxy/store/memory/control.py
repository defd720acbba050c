"""The memory store's pauses and agent listings (:class:`~idemproxy.store.protocols.Control`)."""

from __future__ import annotations

from idemproxy.store.batches import BatchStart, batch_starts, newest_first
from idemproxy.store.control import AgentControl, PauseRequest, pause_event, written_pause
from idemproxy.store.journal import DeliveryCursor
from idemproxy.store.memory.tables import MemoryTables
from idemproxy.store.records import EffectMeta, EventType, RecordKey, RecordState
from idemproxy.store.work import Forgotten, Work


class MemoryControl:
    def __init__(self, tables: MemoryTables) -> None:
        self._tables = tables

    async def read_control(self, agent: str) -> AgentControl:
        return self._tables.control(agent)

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        tables = self._tables
        control = tables.control(request.agent)
        if control.version != request.version:
            return None
        now_ms = tables.clock_ms()
        control = tables.controls[request.agent] = written_pause(control, request, now_ms)
        tables.append_audit(request.audit, now_ms)
        type_, reason, state = pause_event(request)
        key = RecordKey(request.agent, "")
        tables.emit_agent(EventType(type_), key, EffectMeta(), reason, state, now_ms)
        return control

    async def list_agents(self) -> list[str]:
        tables, now_ms = self._tables, self._tables.clock_ms()
        agents = {key.agent for key in list(tables.records) if tables.live(key, now_ms)}
        return sorted(agents | set(tables.events) | set(tables.audit))

    async def list_busy_agents(self, work: Work) -> list[str]:
        """Worked out from the records, so an agent leaves a worklist with its last work."""
        tables, now_ms = self._tables, self._tables.clock_ms()
        busy = {
            key.agent
            for key in list(tables.records)
            if (record := tables.live(key, now_ms)) is not None
            and record.state in (RecordState.IN_FLIGHT, RecordState.UNKNOWN)
        }
        if work is Work.APPROVAL:
            return sorted({agent for (agent, _), (a, _) in tables.approvals.items() if a.open})
        if work is Work.REVIEW:
            busy.update(agent for agent, c in tables.controls.items() if c.pause is not None)
        else:
            for agent, events in tables.events.items():
                acked = tables.cursors.get(agent, DeliveryCursor()).acked
                if events and events[-1].event_id > acked:
                    busy.add(agent)
        return sorted(busy)

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        records = self._tables.live_records(agent, self._tables.clock_ms())
        return newest_first(batch_starts(records), limit)

    async def forget_agents(self) -> Forgotten:
        return Forgotten()  # the worklists hold no entry of their own to drop
