"""The request handler: route, classify, then forward (safe) or run the effect flow."""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from idemproxy.effectkeys import (
    ACTION_HEADER,
    AGENT_HEADER,
    BATCH_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    STEP_HEADER,
    TOOL_CALL_HEADER,
    KeyHeaders,
    KeySource,
    resolve_agent,
    resolve_effect_key,
)
from idemproxy.effects.audit import AutoAction, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.effects.outcome import Outcome, outcome_headers
from idemproxy.effects.paused import COMPENSATES_HEADER, PauseGate
from idemproxy.effects.refusals import store_unavailable, upstream_failed
from idemproxy.effects.seal import SEAL_HEADER, forged_compensation
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.fingerprint import fingerprint
from idemproxy.logs import info_fields
from idemproxy.metrics import Children
from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.route import Route
from idemproxy.proxy.body import decoded_body, read_body
from idemproxy.proxy.endpoints import (
    ask_identity_encoding,
    rewrites_endpoints,
    rewritten_response,
)
from idemproxy.proxy.forward import UpstreamFailure
from idemproxy.proxy.headers import client_response_headers, upstream_request_headers
from idemproxy.proxy.problems import problem_response
from idemproxy.proxy.relay import relay
from idemproxy.proxy.retry import exchange_retried
from idemproxy.proxy.state import CLIENT_SESSION, EFFECT_FLOW, ProxyState
from idemproxy.proxy.upstreams import Target, resolve_target
from idemproxy.scopes import request_scope, scoped
from idemproxy.store.errors import StoreError
from idemproxy.storeguard import StoreGuard

log = logging.getLogger(__name__)
access_log = logging.getLogger("idemproxy.access")


def key_headers(request: web.Request) -> KeyHeaders:
    h = request.headers
    return KeyHeaders(
        agent=h.get(AGENT_HEADER),
        batch=h.get(BATCH_HEADER),
        tool_call=h.get(TOOL_CALL_HEADER),
        step=h.get(STEP_HEADER),
        action=h.get(ACTION_HEADER),
        idempotency_key=h.get(IDEMPOTENCY_KEY_HEADER),
    )


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
            response = problem_response(
                refusal.code,
                refusal.detail,
                effect_key=refusal.effect_key,
                retry_after_s=refusal.retry_after_s,
                extra=refusal.extra,
            )
        finally:
            metrics.inflight_requests.dec()
            self.state.handlers.discard(task)
        elapsed_s = time.perf_counter() - started
        metrics.request_duration.observe(elapsed_s)
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
        state = self.state
        if route.effect is EffectClass.SAFE:
            response = await self._forward_unrecorded(request, target, route, streamed=True)
            return response, Outcome.FORWARDED, None
        headers = key_headers(request)
        if state.draining:
            raise RequestRefused(
                ProblemCode.SHUTTING_DOWN,
                "this proxy is shutting down and takes no new effects; retry against its"
                " replacement",
                retry_after_s=1,
            )
        agent = resolve_agent(headers, state.config.agent_id, state.config.allow_agent_header)
        raw_body = await read_body(request, route.max_body_bytes)
        # Sealed as sent, before decoding.
        operator = await self._compensation(request, raw_body, agent)
        body = decoded_body(request, raw_body, route.max_body_bytes)
        request_fingerprint = fingerprint(
            request.method,
            target.upstream.name,
            target.path,
            target.query_string,
            body,
            request.headers.get("Content-Type", ""),
            route.volatile_fields,
        )
        key = resolve_effect_key(headers, route, agent, request_fingerprint)
        key = scoped(key, request_scope(target.upstream.policy.scope, request.headers))
        if key is None:
            await self._pauses.check(agent)
            response = await self._forward_unrecorded(
                request, target, route, streamed=False, body=body
            )
            return response, Outcome.PASSTHROUGH, None
        if key.source is KeySource.CONTENT:
            # One effect per content for the window: its record lives exactly that long.
            route = route.model_copy(update={"ttl_s": route.content_window_s})
        context = EffectContext(
            request, target, route, key, body, request_fingerprint, operator=operator
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

    async def _forward_unrecorded(
        self,
        request: web.Request,
        target: Target,
        route: Route,
        *,
        streamed: bool,
        body: bytes | None = None,
    ) -> web.StreamResponse:
        """Forward without a record: reads (retried per the route), and effects a route lets
        through unprotected."""
        if route.retry is not None and streamed:
            # A request that may be sent again is read first; safe routes are small reads.
            body = await read_body(request, route.max_body_bytes) if request.body_exists else None
            streamed = False
        headers = upstream_request_headers(request.headers, keep_length=streamed)
        if body is not None and route.effect is not EffectClass.SAFE:
            headers.popall("Content-Encoding", None)  # the body was decoded on arrival
        rewriting = rewrites_endpoints(target)
        if rewriting:
            ask_identity_encoding(headers)
        payload = (request.content if request.body_exists else None) if streamed else body
        started = time.perf_counter()
        try:
            sending = exchange_retried(
                request.app[CLIENT_SESSION],
                request.method,
                target.url,
                headers,
                payload,
                target.upstream.timeout,
                route.retry,
            )
            async with sending as answer:
                self._upstream_durations(target.upstream.name).observe(
                    time.perf_counter() - started
                )
                client_headers = client_response_headers(answer.headers)
                client_headers.extend(outcome_headers(Outcome.FORWARDED, None))
                if rewriting:
                    return await rewritten_response(request, target, answer, client_headers)
                response, _ = await relay(
                    request,
                    answer,
                    client_headers,
                    capture_limit=None,
                    write_timeout_s=self.state.config.agent_write_timeout_s,
                )
                return response
        except UpstreamFailure as failure:
            raise upstream_failed(failure) from failure
