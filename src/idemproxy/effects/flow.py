"""The exactly-once flow for one request on an effectful route (SPEC section 4).

(held for approval, none usable) 428 approval-required or 403 approval-denied (effects/approval.py)
claim -> (claimed) forward, relay, settle (effects/forwarding.py)
      -> (claimed, replicas did not confirm it) release it, 503 store-not-replicated
      -> (completed) replay the record
      -> (in flight) wait for the holder, then claim again; still held: 409
      -> (unknown) 409 outcome-unknown, into review; never a blind re-send
      -> (another request's key) 409 tool-call-already-acted or 422 (effects/conflicts.py)
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NoReturn

from aiohttp import ClientSession, web

from idemproxy.effectkeys import KeySource
from idemproxy.effects.answers import replay_response
from idemproxy.effects.append import AppendGuard
from idemproxy.effects.approval import ApprovalGate, Held
from idemproxy.effects.attempts import Attempts
from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.effects.conflicts import idempotency_key_reused, tool_call_already_acted
from idemproxy.effects.context import EffectContext
from idemproxy.effects.forwarding import Forwarder
from idemproxy.effects.lease import LeaseKept
from idemproxy.effects.native import NativeDedupe
from idemproxy.effects.outcome import Outcome
from idemproxy.effects.paused import agent_paused
from idemproxy.effects.reconciled import ClaimAgain, Completed, Reconciliation, Review
from idemproxy.effects.refusals import (
    outcome_unknown,
    store_not_replicated,
    store_unavailable,
)
from idemproxy.effects.settler import Settler
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.metricchildren import Children
from idemproxy.metrics import DuplicateKind, Metrics
from idemproxy.store.approvals import Approvals
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectRecord,
    Paused,
    RecordState,
    Settlement,
    Standing,
    Unreplicated,
)

log = logging.getLogger(__name__)


class EffectFlow:
    """Claims each effectful request's key and acts on what the claim finds; one per process."""

    def __init__(
        self,
        store: RecordStore,
        approvals: Approvals,
        attempts: Attempts,
        metrics: Metrics,
        session: ClientSession,
        audit: EffectAudit,
        pause_after_failures: int = 0,
        agent_write_timeout_s: float | None = None,
    ) -> None:
        self.store = store
        self.attempts = attempts
        self.metrics = metrics
        self.audit = audit
        self._duplicates = Children(metrics.duplicates_blocked)
        self.settler = Settler(store, metrics, audit, pause_after_failures)
        self.native = NativeDedupe(store, session)
        self.appends = AppendGuard(store, session, audit)
        self.forwarder = Forwarder(
            session, self.settler, self.native, self.appends, metrics, agent_write_timeout_s
        )
        self.approvals = ApprovalGate(store, approvals, self.settler, audit, metrics)

    async def handle(self, ctx: EffectContext) -> tuple[web.StreamResponse, Outcome]:
        held = await self.approvals.admit(ctx)
        claim = ClaimRequest(
            ctx.key.record_key,
            ctx.fingerprint,
            ctx.meta(),
            ctx.route.lease_ms,
            ctx.route.ttl_s,
            ignore_pause=ctx.operator,
            reworded_may_reclaim=ctx.key.source is KeySource.TOOL_CALL,
        )
        waited = reconciled = False
        while True:
            try:
                result = await self.store.claim(claim)
            except StoreError as exc:
                raise store_unavailable() from exc
            match result:
                case Claimed(fence=fence, unreplicated=Unreplicated() as unreplicated):
                    await self._release_unreplicated(ctx, fence, unreplicated)
                case Claimed(fence=fence, first_attempt_ms=first_attempt_ms):
                    outcome = Outcome.RECONCILED if reconciled else Outcome.FORWARDED
                    claimed = dataclasses.replace(ctx, first_attempt_ms=first_attempt_ms)
                    # A reconcile's re-send is the attempt the approval was spent on, again.
                    approved = None if reconciled else held
                    return await self._attempt(claimed, fence, outcome, approved)
                case Paused(pause=pause):
                    raise agent_paused(ctx.key.record_key.agent, pause)
                case Standing(record=record) as standing:
                    # What the request gets from the record that stands is decided below.
                    await self._audit_lapse(standing)
            other_request = record.fingerprint != ctx.fingerprint
            if other_request:
                await self._refuse_other_request(ctx, record)
            if record.state is RecordState.COMPLETED:
                kind = DuplicateKind.COALESCED if waited else DuplicateKind.REPLAYED
                self._blocked(ctx, kind)
                outcome = Outcome.COALESCED if waited else Outcome.REPLAYED
                return replay_response(record, outcome, ctx.envelope), outcome
            if record.state is RecordState.UNKNOWN:
                # A reconcile re-sends this request, which is not the one in doubt.
                match await self._reconcile(ctx, record, tried=reconciled or other_request):
                    case Completed(record=completed):
                        outcome = Outcome.RECONCILED
                        return replay_response(completed, outcome, ctx.envelope), outcome
                    case ClaimAgain():
                        reconciled = True
                        continue
            if waited:
                self._blocked(ctx, DuplicateKind.IN_PROGRESS)
                raise RequestRefused(
                    ProblemCode.REQUEST_IN_PROGRESS,
                    "another attempt of this effect is still running; retry after a moment to"
                    " get its result",
                    retry_after_s=1,
                )
            try:
                await self.attempts.wait_settled(
                    self.store, ctx.key.record_key, ctx.route.coalesce_wait_ms
                )
            except StoreError as exc:
                raise store_unavailable() from exc
            waited = True

    async def _release_unreplicated(
        self, ctx: EffectContext, fence: int, unreplicated: Unreplicated
    ) -> NoReturn:
        """Give back a claim a failover could lose, unsent: the key is free for the repeat.

        Not the agent's failure, so it does not count toward a pause. Should this write be lost
        too, the claim turns unknown when its lease runs out, and is still never sent.
        """
        reason = f"not forwarded: the store's replicas did not confirm the claim ({unreplicated})"
        released = Settlement(RecordState.NOT_APPLIED, reason=reason, ttl_s=ctx.route.ttl_s)
        await self.settler.settle(ctx, fence, released, counted=False)
        raise store_not_replicated(unreplicated)

    async def _refuse_other_request(self, ctx: EffectContext, record: EffectRecord) -> None:
        """Refuse a request whose key belongs to another request, unless that one may still
        end: a tool call's re-run waits for an attempt in flight, then learns what it did."""
        if ctx.key.source is not KeySource.TOOL_CALL:
            self._blocked(ctx, DuplicateKind.REUSED_KEY)
            await self._refused(record, idempotency_key_reused(record))
        if record.state is RecordState.COMPLETED:
            self._blocked(ctx, DuplicateKind.ALREADY_ACTED)
            await self._refused(record, tool_call_already_acted(record))

    async def _audit_lapse(self, standing: Standing) -> None:
        """Audit the lapsed lease this claim turned unknown, as the sweep audits the ones it
        finds: the store changed the outcome, and no operator did."""
        if not standing.lapsed:
            return
        record = standing.record
        note = (
            "the lease ran out: its proxy died or lost the store; noticed by a repeat;"
            f" batch {record.meta.batch!r}"
        )
        entry = automatic(
            record.key.agent, AutoAction.LAPSED, str(record.key), "in_flight", "unknown", note
        )
        await self.audit.write(entry)

    async def _refused(self, record: EffectRecord, refusal: RequestRefused) -> NoReturn:
        """Audit a repeat refused for carrying another request than its key's, then refuse it:
        the agent re-planned (or reused a key), which the operator reviewing it should see."""
        status = 422 if refusal.code is ProblemCode.IDEMPOTENCY_KEY_REUSED else 409
        entry = automatic(
            record.key.agent,
            AutoAction.CONFLICT_REFUSED,
            str(record.key),
            str(record.state),
            f"refused {status} {refusal.code}",
            f"{record.meta.method} {record.meta.path}: another request under this key",
        )
        await self.audit.write(entry)
        raise refusal

    async def _reconcile(
        self, ctx: EffectContext, record: EffectRecord, tried: bool
    ) -> Completed | ClaimAgain:
        """Reconcile an unknown outcome through the upstream adapter, or refuse it for review.

        At most once per request: a re-send that ends unknown again waits for review.
        """
        reconciliation: Reconciliation
        if tried:
            reconciliation = Review()
        elif ctx.route.append is not None:
            reconciliation = await self.appends.reconcile(record.key)
        else:
            reconciliation = await self.native.reconcile(ctx, record)
        match reconciliation:
            case Review():
                self._blocked(ctx, DuplicateKind.UNKNOWN)
                raise outcome_unknown(record)
            case Completed() | ClaimAgain():
                return reconciliation

    def _blocked(self, ctx: EffectContext, kind: DuplicateKind) -> None:
        upstream, route, agent = ctx.target.upstream.name, ctx.route.name, ctx.key.record_key.agent
        self._duplicates(upstream, route, kind, self.metrics.agent_label(agent)).inc()
        self.metrics.blocked.count(agent, ctx.key.batch, upstream, route, kind)

    async def _attempt(
        self, ctx: EffectContext, fence: int, outcome: Outcome, held: Held | None
    ) -> tuple[web.StreamResponse, Outcome]:
        key = ctx.key.record_key
        if held is not None:  # sent only under an approval this attempt uses
            await self.approvals.on_claimed(ctx, held, fence)
        self.attempts.begin(key, fence)
        try:
            with LeaseKept(self.store, key, fence, ctx.route.lease_ms):
                if ctx.route.append is not None:
                    return await self.forwarder.append(ctx, ctx.route.append, fence, outcome)
                return await self.forwarder.forward(ctx, fence, outcome)
        finally:
            self.attempts.end(key)
