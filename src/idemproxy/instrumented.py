"""A Store wrapper that times every operation and counts failures, for the metrics."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from idemproxy.metrics import Metrics
from idemproxy.store.approvals import Approval, DecideRequest, HoldRequest
from idemproxy.store.batches import BatchStart
from idemproxy.store.control import AgentControl, PauseRequest
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.protocols import Store
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
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.work import Forgotten, Work

T = TypeVar("T")


class InstrumentedStore:
    def __init__(self, store: Store, metrics: Metrics) -> None:
        self.inner = store
        self.backend = store.backend
        self.retention = store.retention
        self._metrics = metrics
        self._durations = {
            op: metrics.store_operation_duration.labels(op)
            for op in (
                "ping",
                "now",
                "claim",
                "settle",
                "resolve",
                "renew",
                "get",
                "list_unknown",
                "batch",
                "events",
                "count_events",
                "list_agents",
                "list_busy_agents",
                "forget_agents",
                "list_batches",
                "sweep",
                "cursor",
                "audit",
                "archive",
                "control",
                "durability",
                "marker",
                "approval",
            )
        }

    async def _timed(self, op: str, call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        try:
            return await call()
        except StoreError:
            self._metrics.store_errors.labels(op).inc()
            raise
        finally:
            self._durations[op].observe(time.perf_counter() - started)

    async def ping(self) -> None:
        await self._timed("ping", self.inner.ping)

    async def now_ms(self) -> int:
        return await self._timed("now", self.inner.now_ms)

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self._timed("claim", lambda: self.inner.claim(request))

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        return await self._timed("settle", lambda: self.inner.settle(key, fence, settlement))

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        return await self._timed("resolve", lambda: self.inner.resolve(request))

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        return await self._timed("renew", lambda: self.inner.renew(key, fence, lease_ms))

    async def get(self, key: RecordKey) -> EffectRecord | None:
        return await self._timed("get", lambda: self.inner.get(key))

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self._timed("list_unknown", lambda: self.inner.list_unknown(agent, limit))

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        return await self._timed("batch", lambda: self.inner.batch_records(agent, batch))

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        return await self._timed("events", lambda: self.inner.read_events(agent, after, limit))

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        return await self._timed("count_events", lambda: self.inner.count_events(agent, after, cap))

    async def list_agents(self) -> list[str]:
        return await self._timed("list_agents", self.inner.list_agents)

    async def list_busy_agents(self, work: Work) -> list[str]:
        return await self._timed("list_busy_agents", lambda: self.inner.list_busy_agents(work))

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        return await self._timed("list_batches", lambda: self.inner.list_batches(agent, limit))

    async def forget_agents(self) -> Forgotten:
        return await self._timed("forget_agents", self.inner.forget_agents)

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self._timed("sweep", lambda: self.inner.sweep_expired(agent, limit))

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return await self._timed("cursor", lambda: self.inner.read_cursor(agent))

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        return await self._timed("cursor", lambda: self.inner.write_cursor(agent, cursor, audit))

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._timed("audit", lambda: self.inner.append_audit(entry))

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        return await self._timed("audit", lambda: self.inner.read_audit(agent, limit))

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        return await self._timed("archive", lambda: self.inner.clear_batch(request))

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return await self._timed("archive", lambda: self.inner.read_archive(agent, batch))

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        return await self._timed("archive", lambda: self.inner.read_outcomes(agent, batch))

    async def read_control(self, agent: str) -> AgentControl:
        return await self._timed("control", lambda: self.inner.read_control(agent))

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        return await self._timed("control", lambda: self.inner.write_pause(request))

    async def durability(self) -> Durability:
        return await self._timed("durability", self.inner.durability)

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        return await self._timed("marker", lambda: self.inner.check_marker(seen))

    def expect_marker(self, marker: Marker | None) -> None:
        self.inner.expect_marker(marker)

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self._timed("marker", lambda: self.inner.record_loss(kind, detail))

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self._timed(
            "marker", lambda: self.inner.acknowledge_loss(loss_id, actor, note)
        )

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self._timed("marker", lambda: self.inner.read_store_log(limit))

    async def hold(self, request: HoldRequest) -> Approval:
        return await self._timed("approval", lambda: self.inner.hold(request))

    async def decide(self, request: DecideRequest) -> Approval | None:
        return await self._timed("approval", lambda: self.inner.decide(request))

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        return await self._timed("approval", lambda: self.inner.take(agent, approval_id))

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        return await self._timed("approval", lambda: self.inner.get_approval(agent, approval_id))

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        return await self._timed("approval", lambda: self.inner.list_approvals(agent, limit))

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        return await self._timed("approval", lambda: self.inner.expire_approvals(agent, limit))

    async def close(self) -> None:
        await self.inner.close()
