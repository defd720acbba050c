"""A store made of one part per protocol (store/protocols.py): the shape of every backend.

Each backend writes a part per protocol over its own shared state (the memory store's tables,
the SQLite store's file) and composes them here, so no backend writes the whole
:class:`~idemproxy.store.protocols.Store` out again.
"""

from __future__ import annotations

from idemproxy.store.approvals import Approval, Approvals, DecideRequest, HoldRequest
from idemproxy.store.batches import BatchStart
from idemproxy.store.control import AgentControl, PauseRequest
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.protocols import Control, Journal, RecordStore, Safety
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
from idemproxy.store.retention import DEFAULT_RETENTION, Retention
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.work import Forgotten, Work


class ComposedStore:
    """The :class:`~idemproxy.store.protocols.Store` of five parts; ``records`` also says
    which backend it is and opens and closes what the parts share. ``retention`` is what the
    backend built its parts with, for those who report it."""

    def __init__(
        self,
        records: RecordStore,
        journal: Journal,
        control: Control,
        safety: Safety,
        *,
        approvals: Approvals,
        retention: Retention = DEFAULT_RETENTION,
    ) -> None:
        self.backend = records.backend
        self.retention = retention
        self.records = records
        self.journal = journal
        self.control = control
        self.safety = safety
        self.approvals = approvals

    # RecordStore

    async def ping(self) -> None:
        await self.records.ping()

    async def now_ms(self) -> int:
        return await self.records.now_ms()

    async def close(self) -> None:
        await self.records.close()

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

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        return await self.journal.read_outcomes(agent, batch)

    # Control

    async def read_control(self, agent: str) -> AgentControl:
        return await self.control.read_control(agent)

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        return await self.control.write_pause(request)

    async def list_agents(self) -> list[str]:
        return await self.control.list_agents()

    async def list_busy_agents(self, work: Work) -> list[str]:
        return await self.control.list_busy_agents(work)

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        return await self.control.list_batches(agent, limit)

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

    # Approvals

    async def hold(self, request: HoldRequest) -> Approval:
        return await self.approvals.hold(request)

    async def decide(self, request: DecideRequest) -> Approval | None:
        return await self.approvals.decide(request)

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        return await self.approvals.take(agent, approval_id)

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        return await self.approvals.get_approval(agent, approval_id)

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        return await self.approvals.list_approvals(agent, limit)

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        return await self.approvals.expire_approvals(agent, limit)
