"""The operator's view of the ledger on a store, as JSON documents: what the admin API serves
and what the CLI prints with ``--store``. :class:`LedgerService` is one side of the
:class:`~idemproxy.ledger.operator.Operator` seam; the admin client is the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from idemproxy.config.settings import ControllerConfig, StoreSafetyConfig
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger import documents
from idemproxy.ledger.agenterror import error_of
from idemproxy.ledger.approvals import ApprovalDesk, Verdict
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.ledger.batches import list_batches
from idemproxy.ledger.compensation import Compensations
from idemproxy.ledger.compensator import Compensator
from idemproxy.ledger.documents import Document
from idemproxy.ledger.losses import StoreLosses
from idemproxy.ledger.operator import MAX_LIMIT
from idemproxy.ledger.pause import Pauses
from idemproxy.ledger.recovery import RecoverMode, Recovery
from idemproxy.ledger.review import Decision, Review, not_found, parse_key
from idemproxy.ledger.rollback import Rollbacks, RollbackVerb
from idemproxy.metrics import Metrics
from idemproxy.store.approvals import ApprovalState
from idemproxy.store.journal import AuditEntry, DeliveryCursor
from idemproxy.store.protocols import Store
from idemproxy.store.records import StoredResponse
from idemproxy.storeguard import StoreGuard


class ControllerSetting(StrEnum):
    """Whether a recovery controller is delivered the events, as ``status`` reports it."""

    CONFIGURED = "configured"
    NONE = "none"
    UNKNOWN = "unknown"  # a store alone does not say: the proxies' configs do

    @classmethod
    def of(cls, controller: ControllerConfig | None) -> ControllerSetting:
        if controller is None:
            return cls.UNKNOWN
        return cls.CONFIGURED if controller.url is not None else cls.NONE


class LedgerService(RollbackVerb):
    """:class:`Operator` on a store; compensations need a ``compensator`` (a running proxy).

    The store is judged by ``guard``, a running proxy's; without one (the CLI on a store),
    by a guard of the default ``store_safety`` settings. ``controller`` is a running proxy's
    controller settings; without them ``status`` cannot say whether events are delivered.
    """

    def __init__(
        self,
        store: Store,
        actions_per_minute: int = 60,
        compensator: Compensator | None = None,
        guard: StoreGuard | None = None,
        controller: ControllerConfig | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._controller = ControllerSetting.of(controller)
        self._limit = ActionLimit(store, actions_per_minute)
        self._review = Review(store, self._limit)
        self._approvals = ApprovalDesk(store, self._limit)
        self._metrics = metrics
        self._recovery = Recovery(store, self._limit)
        self._pauses = Pauses(store, self._limit)
        self._compensations = Compensations(store, self._limit, compensator)
        self._rollbacks = Rollbacks(store, self._compensations)
        guard = guard or StoreGuard(store, StoreSafetyConfig(), reports=False)
        self._losses = StoreLosses(store, guard)

    async def status(self) -> Document:
        agents = []
        for agent in await self._store.list_agents():
            unknown = len(await self._store.list_unknown(agent, MAX_LIMIT))
            paused = (await self._store.read_control(agent)).pause is not None
            held = await self._store.list_approvals(agent, MAX_LIMIT)
            agents.append(
                {
                    "agent": agent,
                    "unknown": unknown,
                    "awaiting_approval": sum(a.state is ApprovalState.AWAITING for a in held),
                    "paused": paused,
                    "error": await error_of(self._store, agent),
                    **await self._delivery(agent),
                }
            )
        retention = self._retention()
        return {
            "store": self._store.backend,
            "unknown": sum(item["unknown"] for item in agents),
            "awaiting_approval": sum(item["awaiting_approval"] for item in agents),
            "controller": self._controller.value,
            "event_retention_s": retention["events_s"],  # as before "retention" said it all
            "retention": retention,
            "backlog": sum(item["backlog"] for item in agents),
            "parked": sum(1 for item in agents if item["parked"]),
            "paused": sum(1 for item in agents if item["paused"]),
            "in_error": sum(1 for item in agents if item["error"] is not None),
            "agents": agents,
        }

    def _retention(self) -> dict[str, int | None]:
        """The store's figures; memory:// keeps events and audit entries while it runs."""
        kept, memory = self._store.retention, self._store.backend == "memory"
        events, audit = (None, None) if memory else (kept.events_s, kept.audit_s)
        return {"events_s": events, "audit_s": audit, "archive_s": kept.archive_s}

    async def effect(self, key: str) -> Document:
        return documents.record(await self._review.item(parse_key(key)))

    async def events(self, agent: str, after: str | None, limit: int) -> Document:
        await self._known(agent)
        try:
            events = await self._store.read_events(agent, after, _bounded(limit))
        except ValueError as exc:
            raise RequestRefused(ProblemCode.INVALID_REQUEST, f"{exc}; pass an event id") from exc
        return {"agent": agent, "events": [documents.event(event) for event in events]}

    async def batch(self, agent: str, batch: str) -> Document:
        return documents.value(await self._recovery.progress(agent, batch))

    async def batches(self, agent: str, limit: int) -> Document:
        listing = await list_batches(self._store, self._recovery, agent, _bounded(limit))
        return documents.value(listing)

    async def recover(
        self, agent: str, batch: str, mode: RecoverMode, actor: str, note: str
    ) -> Document:
        plan = await self._recovery.recover(agent, batch, mode, actor, note)
        return documents.value(plan)

    async def review(self, agent: str | None, limit: int) -> Document:
        if agent is not None:
            await self._known(agent)
        records = await self._review.queue(agent, _bounded(limit))
        return {"items": [documents.record(record) for record in records]}

    async def resolve(
        self,
        key: str,
        decision: Decision,
        actor: str,
        note: str,
        external_id: str = "",
        response: Document | None = None,
    ) -> Document:
        record = await self._review.resolve(
            parse_key(key),
            decision,
            actor,
            note,
            response=stored_response(response) if response is not None else None,
            external_id=external_id,
        )
        return documents.record(record)

    async def approvals(self, agent: str | None, limit: int) -> Document:
        approvals = await self._approvals.waiting(agent, _bounded(limit))
        return {"items": [documents.approval(approval) for approval in approvals]}

    async def approval(self, agent: str, approval_id: str) -> Document:
        return documents.approval(await self._approvals.item(agent, approval_id))

    async def decide(
        self, agent: str, approval_id: str, verdict: Verdict, actor: str, note: str
    ) -> Document:
        approval = await self._approvals.decide(agent, approval_id, verdict, actor, note)
        if self._metrics is not None:
            self._metrics.approvals.labels(approval.meta.upstream, verdict.value).inc()
        return documents.approval(approval)

    async def deliveries(self, agent: str | None) -> Document:
        if agent is not None:
            await self._known(agent)
        agents = [agent] if agent is not None else await self._store.list_agents()
        return {"agents": [await self._delivery(name) for name in agents]}

    async def _delivery(self, agent: str) -> Document:
        cursor = await self._store.read_cursor(agent)
        backlog = await self._store.count_events(agent, cursor.acked or None)
        return documents.delivery(agent, cursor, backlog)

    async def retry_delivery(self, agent: str, actor: str, note: str) -> Document:
        """Un-park an agent's delivery: the next pass sends its waiting events again."""
        await self._known(agent)
        await self._limit.check(agent)
        cursor = await self._store.read_cursor(agent)
        if not cursor.parked:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"delivery for agent {agent!r} is not parked: nothing to retry",
                extra={"delivery": await self._delivery(agent)},
            )
        was = f"parked after {cursor.attempts} attempts: {cursor.last_error}"
        audit = AuditEntry(agent, AuditAction.RETRY_DELIVERY, actor, agent, was, "delivering", note)
        fresh = DeliveryCursor(acked=cursor.acked, version=cursor.version)
        if await self._store.write_cursor(agent, fresh, audit) is None:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"delivery for agent {agent!r} changed while retrying; look again and retry",
            )
        return await self._delivery(agent)

    async def audit(self, agent: str, limit: int) -> Document:
        await self._known(agent)
        entries = await self._store.read_audit(agent, _bounded(limit))
        return {"agent": agent, "entries": [documents.value(entry) for entry in entries]}

    async def agent(self, agent: str) -> Document:
        """The agent's pause, failure streak, what a resume would free and its error."""
        await self._known(agent)
        status = documents.value(await self._pauses.status(agent))
        return {**status, "error": await error_of(self._store, agent)}

    async def pause(self, agent: str, actor: str, note: str) -> Document:
        await self._known(agent)
        return documents.value(await self._pauses.pause(agent, actor, note))

    async def resume(self, agent: str, actor: str, note: str) -> Document:
        """Mark the cause fixed: free the failed effects of the pause, then resume."""
        await self._known(agent)
        return documents.value(await self._pauses.resume(agent, actor, note))

    async def retry(self, key: str, actor: str, note: str) -> Document:
        """Free one failed effect so that its next request is sent again."""
        return documents.record(await self._pauses.retry(parse_key(key), actor, note))

    async def compensation(self, agent: str, batch: str) -> Document:
        """The plan: what compensating the batch would undo, and what it cannot."""
        return documents.value(await self._compensations.plan(agent, batch))

    async def compensate(
        self,
        agent: str,
        batch: str,
        actor: str,
        note: str,
        credentials: Mapping[str, Mapping[str, str]],
    ) -> Document:
        """Send the plan's compensations, newest first, until one fails."""
        plan = await self._compensations.run(agent, batch, actor, note, credentials)
        return documents.value(plan)

    async def store_status(self) -> Document:
        """Whether the store can keep records, whether it lost some, and its own log."""
        return await self._losses.status()

    async def acknowledge_loss(self, actor: str, note: str) -> Document:
        """Let effects go ahead again after the store lost records (compare-and-set)."""
        return await self._losses.acknowledge(actor, note)

    async def _known(self, agent: str) -> None:
        if agent not in await self._store.list_agents():
            raise not_found(f"agent {agent!r}")


def _bounded(limit: int) -> int:
    return max(0, min(limit, MAX_LIMIT))


def stored_response(document: Any) -> StoredResponse:
    """The response repeats of an effect resolved as applied get (shape in the refusal)."""
    try:
        status = document["status"]
        headers = document.get("headers", {})
        body = document.get("body", "")
        if not (isinstance(status, int) and 100 <= status <= 599 and isinstance(body, str)):
            raise TypeError
        pairs = tuple((str(name), str(value)) for name, value in headers.items())
    except (TypeError, KeyError, AttributeError):
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            'response must look like {"status": 200, "headers": {"content-type":'
            ' "application/json"}, "body": "{...}"}',
        ) from None
    return StoredResponse(status, pairs, body.encode())
