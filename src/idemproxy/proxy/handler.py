"""The request handler: route, classify, then forward (safe) or run the effect flow."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from idemproxy.effectkeys import (
    KeySource,
    resolve_agent,
    resolve_effect_key,
)
from idemproxy.effects.audit import AutoAction, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.effects.envelope import HTTP
from idemproxy.effects.outcome import Outcome
from idemproxy.effects.paused import COMPENSATES_HEADER, PauseGate
from idemproxy.effects.refusals import store_unavailable
from idemproxy.effects.seal import SEAL_HEADER, forged_compensation
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.logs import info_fields
from idemproxy.mcpcalls import (
    McpClassifier,
    missing_key,
)
from idemproxy.metricchildren import Children
from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.route import Route
from idemproxy.proxy.body import decoded_body, read_body
from idemproxy.proxy.identify import (
    ENVELOPE,
    ROUTE_NAME,
    Effect,
    Passed,
    http_request,
    mcp_request,
)
from idemproxy.proxy.state import EFFECT_FLOW, ProxyState
from idemproxy.proxy.unrecorded import UnrecordedForwarder
from idemproxy.proxy.upstreams import Target, resolve_target
from idemproxy.scopes import request_scope, scoped
from idemproxy.store.errors import StoreError
from idemproxy.storeguard import StoreGuard

log = logging.getLogger(__name__)
access_log = logging.getLogger("idemproxy.access")


async def _admit(guard: StoreGuard) -> None:
    """The store's verdict on an effect, when it has to be asked for."""
    try:
        await guard.admit()
    except StoreError as exc:
        raise store_unavailable() from exc


class ProxyHandler:
    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self._answered = Children(state.metrics.requests)
        self._upstream_durations = Children(state.metrics.upstream_request_duration)
        self._pauses = PauseGate(state.store.read_control)
        self._unrecorded = UnrecordedForwarder(state)
        self._classifiers = {
            upstream.name: McpClassifier(upstream.policy.mcp)
            for upstream in state.upstreams.values()
            if upstream.policy.mcp is not None
        }

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        metrics = self.state.metrics
        metrics.inflight_requests.inc()
        task = asyncio.current_task()
        assert task is not None
        self.state.handlers.add(task)
        upstream_name = route_name = "-"
        effect_key: str | None = None
        outcome: Outcome | ProblemCode
        try:
            target = resolve_target(request.raw_path, self.state.upstreams)
            upstream_name = target.upstream.name
            route = target.upstream.matcher.match(request.method, target.path)
            route_name = route.name
            response, outcome, effect_key = await self._dispatch(request, target, route)
        except RequestRefused as refusal:
            outcome = refusal.code
            effect_key = refusal.effect_key
            response = request.get(ENVELOPE, HTTP).refusal(refusal)
        finally:
            metrics.inflight_requests.dec()
            self.state.handlers.discard(task)
        elapsed_s = time.perf_counter() - started
        metrics.request_duration.observe(elapsed_s)
        route_name = request.get(ROUTE_NAME, route_name)
        self._answered(upstream_name, route_name, outcome).inc()
        info_fields(
            access_log,
            f"{request.method} {upstream_name} -> {response.status} {outcome}",
            {
                "upstream": upstream_name,
                "route": route_name,
                "outcome": str(outcome),
                "status": response.status,
                "effect_key": effect_key,
                "duration_ms": round(elapsed_s * 1000, 3),
            },
        )
        return response

    async def _dispatch(
        self, request: web.Request, target: Target, route: Route
    ) -> tuple[web.StreamResponse, Outcome, str | None]:
        if route.effect is EffectClass.SAFE:
            response = await self._unrecorded.forward(request, target, route, streamed=True)
            return response, Outcome.FORWARDED, None
        raw_body = await read_body(request, route.max_body_bytes)
        body = decoded_body(request, raw_body, route.max_body_bytes)
        classifier = self._classifiers.get(target.upstream.name)
        if classifier is not None and request.method == "POST":
            return await self._mcp_message(request, target, route, classifier, raw_body, body)
        effect = http_request(request, target, route, raw_body, body)
        return await self._effect(request, target, effect)

    async def _mcp_message(
        self,
        request: web.Request,
        target: Target,
        route: Route,
        classifier: McpClassifier,
        raw_body: bytes,
        body: bytes,
    ) -> tuple[web.StreamResponse, Outcome, str | None]:
        """An MCP server's message (mcpcalls.py): a tool call that acts is an effect, keyed by
        its tool call and arguments; anything else is forwarded as it came."""
        identified = mcp_request(request, target, route, classifier, raw_body, body)
        if isinstance(identified, Passed):
            response = await self._unrecorded.forward(
                request,
                target,
                identified.route,
                streamed=False,
                body=raw_body,
                inspect=identified.inspect,
            )
            return response, Outcome.FORWARDED, None
        try:
            return await self._effect(request, target, identified)
        except RequestRefused as refusal:
            if refusal.code is ProblemCode.MISSING_IDEMPOTENCY_KEY:
                raise missing_key(identified.tool) from None
            raise

    async def _effect(
        self, request: web.Request, target: Target, effect: Effect
    ) -> tuple[web.StreamResponse, Outcome, str | None]:
        """Run the exactly-once flow for one effect, or forward it unprotected where its route
        lets a request without a key through."""
        state, route = self.state, effect.route
        if state.draining:
            raise RequestRefused(
                ProblemCode.SHUTTING_DOWN,
                "this proxy is shutting down and takes no new effects; retry against its"
                " replacement",
                retry_after_s=1,
            )
        agent = resolve_agent(
            effect.headers, state.config.agent_id, state.config.allow_agent_header
        )
        # Sealed as sent, before decoding.
        operator = await self._compensation(request, effect.raw_body, agent)
        key = resolve_effect_key(effect.headers, route, agent, effect.fingerprint)
        key = scoped(key, request_scope(target.upstream.policy.scope, request.headers))
        if key is None:
            await self._pauses.check(agent)
            response = await self._unrecorded.forward(
                request, target, route, streamed=False, body=effect.body
            )
            return response, Outcome.PASSTHROUGH, None
        if key.source is KeySource.CONTENT:
            # One effect per content for the window: its record lives exactly that long.
            route = route.model_copy(update={"ttl_s": route.content_window_s})
        context = EffectContext(
            request,
            target,
            route,
            key,
            effect.body,
            effect.fingerprint,
            operator=operator,
            envelope=effect.envelope,
            tool=effect.tool,
        )
        guard = state.guard
        try:
            if not guard.admits:  # costs nothing while the last check found the store safe
                await _admit(guard)
            response, outcome = await request.app[EFFECT_FLOW].handle(context)
        except RequestRefused as refusal:
            if refusal.code is ProblemCode.STORE_UNAVAILABLE:
                guard.suspect()  # a store back from an outage may be back empty
            refusal.effect_key = str(key)
            raise
        return response, outcome, str(key)

    async def _compensation(self, request: web.Request, body: bytes, agent: str) -> bool:
        """Whether this is an operator's compensation, which passes the agent's pause: one the
        admin API sent, as its seal proves. ``Idem-Compensates`` without it is refused, and
        audited: something on the agent's side tried to pass the pause as an operator."""
        compensates = request.headers.get(COMPENSATES_HEADER)
        if compensates is None:
            return False
        seal = request.headers.get(SEAL_HEADER, "")
        if self.state.seal.verifies(seal, request.method, request.raw_path, compensates, body):
            return True
        log.warning(
            "refused a forged compensation: Idem-Compensates without the proxy's seal",
            extra={"compensates": compensates},
        )
        note = f"a {request.method} with Idem-Compensates but without the proxy's seal"
        entry = automatic(agent, AutoAction.FORGED_COMPENSATION, compensates, "", "refused", note)
        await request.app[EFFECT_FLOW].audit.write(entry)
        raise forged_compensation()
