"""One attempt of an effect, sent while it holds the claim: forwarded once, its outcome settled.

An append route first reads the value back (append.py); a native-key route sends the
upstream's own dedupe key and reconciles an answer whose status does not tell (native.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import NoReturn

from aiohttp import ClientSession, web

from idemproxy.effects.append import AppendGuard, Present, Send
from idemproxy.effects.context import EffectContext
from idemproxy.effects.native import NativeDedupe
from idemproxy.effects.outcome import Outcome, outcome_headers
from idemproxy.effects.refusals import upstream_failed
from idemproxy.effects.settler import Settler
from idemproxy.effects.status import classify_status
from idemproxy.errors import RequestRefused
from idemproxy.metricchildren import Children
from idemproxy.metrics import Metrics
from idemproxy.policies.append import AppendRule
from idemproxy.policies.kinds import EffectClass
from idemproxy.proxy.forward import Exchange, UpstreamFailure
from idemproxy.proxy.headers import (
    ask_decodable_codings,
    client_response_headers,
    headers_to_store,
    upstream_request_headers,
)
from idemproxy.proxy.relay import Relayed, relay
from idemproxy.store.records import RecordState, Settlement


class Forwarder:
    """Sends an attempt that holds the claim, relays the answer and settles what it says."""

    def __init__(
        self,
        session: ClientSession,
        settler: Settler,
        native: NativeDedupe,
        appends: AppendGuard,
        metrics: Metrics,
        agent_write_timeout_s: float | None = None,
    ) -> None:
        self.session = session
        self.settler = settler
        self.native = native
        self.appends = appends
        self.agent_write_timeout_s = agent_write_timeout_s
        self._upstream_durations = Children(metrics.upstream_request_duration)

    async def append(
        self, ctx: EffectContext, rule: AppendRule, fence: int, outcome: Outcome
    ) -> tuple[web.StreamResponse, Outcome]:
        """Send only what the value's end does not already hold (effects/append.py)."""
        try:
            checked = await self.appends.check(ctx, rule)
        except RequestRefused as refusal:
            settlement = Settlement(
                RecordState.NOT_APPLIED, reason=refusal.detail, ttl_s=ctx.route.ttl_s
            )
            await self.settler.settle(ctx, fence, settlement)
            raise
        match checked:
            case Send(context=context):
                return await self.forward(context, fence, outcome)
            case Present(response=response, settlement=settlement, audit=audit):
                await self.settler.settle(ctx, fence, settlement, audit=audit)
                return response, Outcome.RECONCILED

    async def forward(
        self, ctx: EffectContext, fence: int, outcome: Outcome
    ) -> tuple[web.StreamResponse, Outcome]:
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
                if self.native.reconciles_answer(ctx, sent, answer.status):
                    reconciled = await self.native.reconcile_answer(ctx, sent, answer)
                    await self.settler.settle(
                        ctx, fence, reconciled.settlement, audit=reconciled.audit
                    )
                    return reconciled.response, reconciled.outcome
                state = classify_status(answer.status, route)
                client_headers = client_response_headers(answer.headers)
                client_headers.extend(outcome_headers(outcome, str(ctx.key)))
                client_headers.extend(ctx.answer_headers)
                capture = route.max_recorded_bytes if state is RecordState.COMPLETED else None
                stored_headers = headers_to_store(
                    answer.headers, allow_set_cookie=route.allow_set_cookie
                )

                async def record(relayed: Relayed) -> None:
                    nonlocal recorded
                    recorded = True  # before the write: a cancelled settle still lands (shield)
                    settled, counted = ctx.envelope.settlement(
                        state, answer.status, stored_headers, relayed, route
                    )
                    await self.settler.settle(ctx, fence, settled, counted=counted)

                response, _ = await relay(
                    ctx.request, answer, client_headers, capture, record, self.agent_write_timeout_s
                )
        except UpstreamFailure as failure:
            await self._failed(ctx, fence, failure)
        except asyncio.CancelledError:
            if not recorded:
                # Shutdown or a dropped handler while the upstream may hold the request.
                stopped = Settlement(
                    RecordState.UNKNOWN, reason="proxy stopped before the upstream answered"
                )
                # The proxy stopping is no failure of the agent's: it does not count toward a
                # pause.
                await self.settler.settle(ctx, fence, stopped, counted=False)
            raise
        return response, outcome

    async def _failed(self, ctx: EffectContext, fence: int, failure: UpstreamFailure) -> NoReturn:
        retryable = not failure.sent or ctx.route.effect is EffectClass.GENERATION
        state = RecordState.NOT_APPLIED if retryable else RecordState.UNKNOWN
        settlement = Settlement(state, reason=failure.reason, ttl_s=ctx.route.ttl_s)
        await self.settler.settle(ctx, fence, settlement)
        if not failure.sent:
            raise upstream_failed(failure)
        # An append is reconciled by its read-back, as a native key is by the upstream.
        reconciles = not retryable and (
            ctx.route.append is not None or await self.native.reconciles_on_retry(ctx)
        )
        if retryable:
            detail = f"{failure.reason}; this generation may be retried with the same key"
        elif reconciles:
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
        raise upstream_failed(failure, detail, retry_after_s=1 if reconciles or retryable else None)
