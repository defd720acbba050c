"""What an effectful route's request is, before the flow runs: an effect, with its key
headers, fingerprint and framing; or, for an MCP server, a message passed unrecorded."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from idemproxy import jsonrpc
from idemproxy.effectkeys import (
    ACTION_HEADER,
    AGENT_HEADER,
    BATCH_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    STEP_HEADER,
    TOOL_CALL_HEADER,
    KeyHeaders,
)
from idemproxy.effects.envelope import HTTP, SESSION_HEADER, Envelope, JsonRpcEnvelope
from idemproxy.fingerprint import fingerprint
from idemproxy.jsonrpc import Batch, Message
from idemproxy.mcpcalls import METHOD_HEADER, NAME_HEADER, McpClassifier, check_routing_headers
from idemproxy.policies.route import Route
from idemproxy.proxy.problems import JSON_CONTENT_TYPE
from idemproxy.proxy.unrecorded import Inspector
from idemproxy.proxy.upstreams import Target

# How a request's refusal is framed, once its message is known to be a JSON-RPC request.
ENVELOPE = web.RequestKey("envelope", Envelope)
# The route a request is counted under where its message chose another than its path did: an
# MCP tool's, or "rpc".
ROUTE_NAME = web.RequestKey("route_name", str)


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


@dataclass(frozen=True, slots=True)
class Effect:
    """What identifies one effect request, as its route and kind of upstream read it."""

    route: Route
    headers: KeyHeaders
    raw_body: bytes  # as sent: what a compensation's seal covers
    body: bytes  # content coding undone
    fingerprint: str
    envelope: Envelope = HTTP
    tool: str = ""  # the MCP tool a tools/call calls


@dataclass(frozen=True, slots=True)
class Passed:
    """An MCP message that acts on nothing, forwarded under ``route``; ``inspect`` reads its
    answer as it passes."""

    route: Route
    inspect: Inspector | None = None


def http_request(
    request: web.Request, target: Target, route: Route, raw_body: bytes, body: bytes
) -> Effect:
    """An HTTP effect: its request is what it is, method, path, query and body."""
    request_fingerprint = fingerprint(
        request.method,
        target.upstream.name,
        target.path,
        target.query_string,
        body,
        request.headers.get("Content-Type", ""),
        route.volatile_fields,
    )
    return Effect(route, key_headers(request), raw_body, body, request_fingerprint)


def mcp_request(
    request: web.Request,
    target: Target,
    route: Route,
    classifier: McpClassifier,
    raw_body: bytes,
    body: bytes,
) -> Effect | Passed:
    """An MCP server's message: a tool call that acts is an effect, known by its tool call,
    tool and arguments and answered as its JSON-RPC request; anything else passes."""
    message = jsonrpc.parse(body)
    envelope: Envelope = HTTP
    if isinstance(message, Batch) or (isinstance(message, Message) and message.is_request):
        envelope = JsonRpcEnvelope(
            message.id if isinstance(message, Message) else None,  # a batch's refusal: null
            request.headers.get(SESSION_HEADER),
            classifier.rules.not_applied_errors,
            route.max_recorded_bytes,
        )
        request[ENVELOPE] = envelope  # refusals answer as JSON-RPC errors
    check_routing_headers(
        message, request.headers.get(METHOD_HEADER), request.headers.get(NAME_HEADER)
    )
    headers = key_headers(request)
    call = None if message is None else classifier.tool_call(message, route, headers)
    if call is None:
        passed = Passed(classifier.passed_route(route, message), classifier.inspector(message))
        request[ROUTE_NAME] = passed.route.name
        return passed
    request_fingerprint = fingerprint(
        "POST",
        target.upstream.name,
        target.path,
        "",
        call.identity,
        JSON_CONTENT_TYPE,
        call.volatile_fields,
    )
    request[ROUTE_NAME] = call.route.name
    return Effect(
        call.route, call.headers, raw_body, body, request_fingerprint, envelope, call.tool
    )
