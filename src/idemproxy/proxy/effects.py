"""The exactly-once flow for one request on an effectful route (SPEC section 4).

claim -> (claimed) forward, relay, settle
      -> (claimed, replicas did not confirm it) release it, 503 store-not-replicated
      -> (completed) replay the record
      -> (in flight) wait for the holder, then claim again; still held: 409
      -> (unknown) 409 outcome-unknown, into review; never a blind re-send
      -> (another request's key) 409 tool-call-already-acted or 422 (proxy/conflicts.py)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import NoReturn

from aiohttp import ClientSession, web

from idemproxy.effectkeys import EffectKey, KeySource
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.metrics import Children, DuplicateKind, Metrics
from idemproxy.policies.model import EffectClass, Route
from idemproxy.policies.secretpaths import shown_path
from idemproxy.proxy.append import AppendGuard
from idemproxy.proxy.attempts import Attempts
from idemproxy.proxy.conflicts import idempotency_key_reused, tool_call_already_acted
from idemproxy.proxy.forward import Exchange, UpstreamFailure
from idemproxy.proxy.headers import (
    ask_decodable_codings,
    client_response_headers,
    headers_to_store,
    upstream_request_headers,
)
from idemproxy.proxy.lease import LeaseKept
from idemproxy.proxy.native import NativeDedupe, Reconciled
from idemproxy.proxy.outcome import Outcome, outcome_headers
from idemproxy.proxy.paused import agent_paused
from idemproxy.proxy.relay import Relayed, relay
from idemproxy.proxy.upstreams import Target
from idemproxy.proxy.verdicts import (
    classify_status,
    outcome_unknown,
    replay_response,
    settlement_for,
    store_not_replicated,
    store_unavailable,
)
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    EffectRecord,
    Paused,
    RecordState,
    Settlement,
    Standing,
    Unreplicated,
)

log = logging.getLogger(__name__)

_SETTLE_DELAYS_S = (0.05, 0.2, 0.5, 1.0)


@dataclass(frozen=True, slots=True)
class EffectContext:
    """Everything the flow needs about one request, fixed before the claim."""

    request: web.Request
    target: Target
    route: Route
    key: EffectKey
    body: bytes
    fingerprint: str
    answer_headers: tuple[tuple[str, str], ...] = ()  # added to the upstream's answer
    # An operator's compensation: sent while the agent is paused, not counted toward a pause.
    operator: bool = False
    # Known once claimed: when the effect's first attempt was, by the store's clock. Native keys
    # that carry a time (Bluesky record keys) are cut from it.
    first_attempt_ms: int = 0


class EffectFlow:
    def __init__(
        self,
        store: RecordStore,
        attempts: Attempts,
        metrics: Metrics,
        session: ClientSession,
        pause_after_failures: int = 0,
        agent_write_timeout_s: float | None = None,
    ) -> None:
        self.store = store
        self.agent_write_timeout_s = agent_write_timeout_s
        self.pause_after_failures = pause_after_failures
        self.attempts = attempts
        self.metrics = metrics
        self._duplicates = Children(metrics.duplicates_blocked)
        self._upstream_durations = Children(metrics.upstream_request_duration)
        self.session = session
        self.native = NativeDedupe(store, session)
        self.appends = AppendGuard(store, session)

    async def handle(self, ctx: EffectContext) -> tuple[web.StreamResponse, Outcome | ProblemCode]:
        meta = EffectMeta(
            batch=ctx.key.batch,
            tool_call=ctx.key.tool_call,
            action=ctx.key.action,
            upstream=ctx.target.upstream.name,
            method=ctx.request.method,
            # What the record keeps, and every event, answer and payload made from it, shows.
            path=shown_path(ctx.route, ctx.target.path),
        )
        claim = ClaimRequest(
            ctx.key.record_key,
            ctx.fingerprint,
            meta,
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
                    return await self._attempt(claimed, fence, outcome)
                case Paused(pause=pause):
                    raise agent_paused(ctx.key.record_key.agent, pause)
                case Standing(record=record):
                    pass  # what the request gets from the record that stands, below
            other_request = record.fingerprint != ctx.fingerprint
            if other_request:
                self._refuse_other_request(ctx, record)
            if record.state is RecordState.COMPLETED:
                kind = DuplicateKind.COALESCED if waited else DuplicateKind.REPLAYED
                self._blocked(ctx, kind)
                outcome = Outcome.COALESCED if waited else Outcome.REPLAYED
                return replay_response(record, outcome), outcome
            if record.state is RecordState.UNKNOWN:
                # A reconcile re-sends this request, which is not the one in doubt.
                settled = await self._reconcile(ctx, record, tried=reconciled or other_request)
                if settled.record is not None:
                    outcome = Outcome.RECONCILED
                    return replay_response(settled.record, outcome), outcome
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
        await self._settle(ctx, fence, released, counted=False)
        raise store_not_replicated(unreplicated)

    def _refuse_other_request(self, ctx: EffectContext, record: EffectRecord) -> None:
        """Refuse a request whose key belongs to another request, unless that one may still
        end: a tool call's re-run waits for an attempt in flight, then learns what it did."""
        if ctx.key.source is not KeySource.TOOL_CALL:
            self._blocked(ctx, DuplicateKind.REUSED_KEY)
            raise idempotency_key_reused(record)
        if record.state is RecordState.COMPLETED:
            self._blocked(ctx, DuplicateKind.ALREADY_ACTED)
            raise tool_call_already_acted(record)

    async def _reconcile(self, ctx: EffectContext, record: EffectRecord, tried: bool) -> Reconciled:
        """Settle an unknown outcome through the upstream adapter, or refuse it for review.

        At most once per request: a re-send that ends unknown again waits for review.
        """
        if tried:
            settled = None
        elif ctx.route.append is not None:
            settled = await self.appends.reopen(record.key)
        else:
            settled = await self.native.reconcile(ctx, record)
        if settled is None:
            self._blocked(ctx, DuplicateKind.UNKNOWN)
            raise outcome_unknown(record)
        return settled

    def _blocked(self, ctx: EffectContext, kind: DuplicateKind) -> None:
        upstream, route, agent = ctx.target.upstream.name, ctx.route.name, ctx.key.record_key.agent
        self._duplicates(upstream, route, kind, self.metrics.agent_label(agent)).inc()
        self.metrics.blocked.count(agent, ctx.key.batch, upstream, route, kind)

    async def _attempt(
        self, ctx: EffectContext, fence: int, outcome: Outcome
    ) -> tuple[web.StreamResponse, Outcome | ProblemCode]:
        key = ctx.key.record_key
        self.attempts.begin(key, fence)
        try:
            with LeaseKept(self.store, key, fence, ctx.route.lease_ms):
                if ctx.route.append is not None:
                    return await self._append(ctx, fence, outcome)
                return await self._forward(ctx, fence, outcome)
        finally:
            self.attempts.end(key)

    async def _append(
        self, ctx: EffectContext, fence: int, outcome: Outcome
    ) -> tuple[web.StreamResponse, Outcome | ProblemCode]:
        """Send only what the value's end does not already hold (proxy/append.py)."""
        try:
            checked = await self.appends.check(ctx)
        except RequestRefused as refusal:
            settlement = Settlement(
                RecordState.NOT_APPLIED, reason=refusal.detail, ttl_s=ctx.route.ttl_s
            )
            await self._settle(ctx, fence, settlement)
            raise
        if checked.settlement is None:
            return await self._forward(checked.context, fence, outcome)
        assert checked.response is not None
        await self._settle(ctx, fence, checked.settlement)
        return checked.response, Outcome.RECONCILED

    async def _forward(
        self, ctx: EffectContext, fence: int, outcome: Outcome
    ) -> tuple[web.StreamResponse, Outcome | ProblemCode]:
        route, upstream = ctx.route, ctx.target.upstream
        headers = upstream_request_headers(ctx.request.headers, keep_length=False)
        headers.popall("Content-Encoding", None)  # the body was decoded on arrival
        ask_decodable_codings(headers)
        sent = self.native.outgoing(ctx)  # the agent's request, carrying the native key
        headers.update(sent.headers)
        recorded = False
        started = time.perf_counter()
        try:
            async with Exchange(
                self.session,
                ctx.request.method,
                ctx.target.url,
                headers,
                sent.body,
                upstream.timeout,
            ) as answer:
                # Timed as a read is (proxy/handler.py): until the answer's head is in.
                self._upstream_durations(upstream.name).observe(time.perf_counter() - started)
                if self.native.verifies(ctx, sent, answer.status):
                    verified = await self.native.verify(ctx, sent, answer)
                    await self._settle(ctx, fence, verified.settlement)
                    return verified.response, verified.outcome
                verdict = classify_status(answer.status, route)
                client_headers = client_response_headers(answer.headers)
                client_headers.extend(outcome_headers(outcome, str(ctx.key)))
                client_headers.extend(ctx.answer_headers)
                capture = route.max_recorded_bytes if verdict is RecordState.COMPLETED else None
                stored_headers = headers_to_store(
                    answer.headers, allow_set_cookie=route.allow_set_cookie
                )

                async def record(relayed: Relayed) -> None:
                    nonlocal recorded
                    recorded = True  # before the write: a cancelled settle still lands (shield)
                    settled = settlement_for(verdict, answer.status, stored_headers, relayed, route)
                    await self._settle(ctx, fence, settled)

                response, _ = await relay(
                    ctx.request, answer, client_headers, capture, record, self.agent_write_timeout_s
                )
        except UpstreamFailure as failure:
            return await self._failed(ctx, fence, failure)
        except asyncio.CancelledError:
            if not recorded:
                # Shutdown or a dropped handler while the upstream may hold the request.
                stopped = Settlement(
                    RecordState.UNKNOWN, reason="proxy stopped before the upstream answered"
                )
                # The proxy stopping is no failure of the agent's: it does not count toward a
                # pause.
                await self._settle(ctx, fence, stopped, counted=False)
            raise
        return response, outcome

    async def _failed(
        self, ctx: EffectContext, fence: int, failure: UpstreamFailure
    ) -> tuple[web.StreamResponse, Outcome | ProblemCode]:
        retryable = not failure.sent or ctx.route.effect is EffectClass.GENERATION
        state = RecordState.NOT_APPLIED if retryable else RecordState.UNKNOWN
        settlement = Settlement(state, reason=failure.reason, ttl_s=ctx.route.ttl_s)
        await self._settle(ctx, fence, settlement)
        if not failure.sent:
            raise RequestRefused(
                ProblemCode.UPSTREAM_UNREACHABLE,
                f"nothing was sent ({failure.reason}); retrying is safe",
            )
        code = (
            ProblemCode.UPSTREAM_TIMEOUT if failure.timed_out else ProblemCode.UPSTREAM_DISCONNECTED
        )
        # An append is settled by its read-back, as a native key is by the upstream.
        settles = not retryable and (ctx.route.append is not None or await self.native.settles(ctx))
        if retryable:
            detail = f"{failure.reason}; this generation may be retried with the same key"
        elif settles:
            detail = (
                f"the request was sent but {failure.reason}; it carried the upstream's own dedupe"
                " key, so a retry with the same key settles the outcome without acting twice"
            )
        else:
            detail = (
                f"the request was sent but {failure.reason}; whether it took effect is unknown,"
                " so the key is held for review and will not be re-sent"
            )
        # Retry-After also tells SDK retry loops to go on: a generation may simply run again.
        raise RequestRefused(code, detail, retry_after_s=1 if settles or retryable else None)

    async def _settle(
        self, ctx: EffectContext, fence: int, settlement: Settlement, *, counted: bool = True
    ) -> None:
        """Write the outcome, shielded from cancellation and retried through short store blips.

        If the store stays down the record keeps its lease and turns ``unknown`` once that
        runs out: the agent got its answer, and a repeat is never sent blindly. A ``counted``
        outcome of the agent's own effects joins (or ends) its failure streak.
        """
        key = ctx.key.record_key
        if counted and not ctx.operator and self.pause_after_failures:
            settlement = dataclasses.replace(
                settlement, pause_after_failures=self.pause_after_failures
            )
        for delay_s in (*_SETTLE_DELAYS_S, None):
            try:
                held = await asyncio.shield(self.store.settle(key, fence, settlement))
            except StoreError:
                if delay_s is None:
                    log.error("could not record outcome", extra={"effect_key": str(key)})
                    return
                await asyncio.sleep(delay_s)
                continue
            if not held:
                self.metrics.fenced_writes.inc()
                log.warning("late write dropped: lease lost", extra={"effect_key": str(key)})
            return
