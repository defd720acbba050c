"""Forwarding without a record: reads (retried per the route), MCP protocol messages, and
effects a route lets through unprotected."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from aiohttp import web

from idemproxy.effects.outcome import Outcome, outcome_headers
from idemproxy.effects.refusals import upstream_failed
from idemproxy.jsonrpc import EVENT_STREAM_TYPE
from idemproxy.metricchildren import Children
from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.route import Route
from idemproxy.proxy.body import read_body
from idemproxy.proxy.endpoints import (
    ask_identity_encoding,
    rewrites_endpoints,
    rewritten_response,
)
from idemproxy.proxy.forward import UpstreamFailure
from idemproxy.proxy.headers import client_response_headers, upstream_request_headers
from idemproxy.proxy.relay import relay
from idemproxy.proxy.retry import exchange_retried
from idemproxy.proxy.state import CLIENT_SESSION, ProxyState
from idemproxy.proxy.upstreams import Target

# Reads the answer's body and its Content-Type once relayed (an MCP tools/list's annotations).
Inspector = Callable[[bytes, str], None]
INSPECTED_BYTES = 4 * 1024 * 1024


class UnrecordedForwarder:
    """Sends a request that makes no record and relays its answer as it comes."""

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self._upstream_durations = Children(state.metrics.upstream_request_duration)

    async def forward(
        self,
        request: web.Request,
        target: Target,
        route: Route,
        *,
        streamed: bool,
        body: bytes | None = None,
        inspect: Inspector | None = None,
    ) -> web.StreamResponse:
        if route.retry is not None and streamed:
            # A request that may be sent again is read first; safe routes are small reads.
            body = await read_body(request, route.max_body_bytes) if request.body_exists else None
            streamed = False
        headers = upstream_request_headers(request.headers, keep_length=streamed)
        if body is not None and route.effect is not EffectClass.SAFE:
            headers.popall("Content-Encoding", None)  # the body was decoded on arrival
        rewriting = rewrites_endpoints(target)
        if rewriting or inspect is not None:
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
                content_type = answer.headers.get("Content-Type", "")
                with self._stream_held(content_type):
                    response, relayed = await relay(
                        request,
                        answer,
                        client_headers,
                        capture_limit=INSPECTED_BYTES if inspect is not None else None,
                        write_timeout_s=self.state.config.agent_write_timeout_s,
                    )
                if inspect is not None and relayed.complete and not relayed.truncated:
                    inspect(relayed.body, content_type)
                return response
        except UpstreamFailure as failure:
            raise upstream_failed(failure) from failure

    def _stream_held(self, content_type: str) -> _Stream:
        media_type = content_type.split(";", 1)[0].strip().lower()
        return _Stream(self.state, media_type == EVENT_STREAM_TYPE)


class _Stream:
    """Marks the handler relaying an event stream, which has no end to wait for: a shutdown
    cancels it at once (server.py), where it would otherwise hold the whole shutdown timeout
    for a client that may be long gone (an MCP session's GET stream)."""

    def __init__(self, state: ProxyState, event_stream: bool) -> None:
        self.state = state
        self.task = asyncio.current_task() if event_stream else None

    def __enter__(self) -> None:
        if self.task is not None:
            self.state.streams.add(self.task)

    def __exit__(self, *_: object) -> None:
        if self.task is not None:
            self.state.streams.discard(self.task)
