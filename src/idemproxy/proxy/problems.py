"""Problem documents (RFC 9457): every answer the proxy gives instead of the upstream's."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from idemproxy import jsonrpc
from idemproxy.encodings import ACCEPTED
from idemproxy.errors import ProblemCode
from idemproxy.jsonrpc import RequestId

PROBLEM_TYPE_BASE = "https://idemproxy.dev/problems/"
PROBLEM_CONTENT_TYPE = "application/problem+json"
JSON_CONTENT_TYPE = "application/json"
# The JSON-RPC error code of every refusal of the proxy's own, in the range JSON-RPC leaves to
# implementations (-32000 to -32099); ``error.data.code`` says which refusal it is.
PROXY_REFUSED_ERROR = -32030

_STATUS: dict[ProblemCode, tuple[int, str]] = {
    ProblemCode.MISSING_IDEMPOTENCY_KEY: (400, "Missing idempotency key"),
    ProblemCode.INVALID_IDEMPOTENCY_KEY: (400, "Invalid idempotency key"),
    ProblemCode.INVALID_REQUEST: (400, "Invalid request"),
    ProblemCode.UNKNOWN_UPSTREAM: (404, "Unknown upstream"),
    ProblemCode.REQUEST_IN_PROGRESS: (409, "Request in progress"),
    ProblemCode.OUTCOME_UNKNOWN: (409, "Outcome unknown"),
    ProblemCode.TOOL_CALL_ALREADY_ACTED: (409, "Tool call already acted"),
    ProblemCode.BODY_TOO_LARGE: (413, "Request body too large"),
    ProblemCode.UNSUPPORTED_CONTENT_ENCODING: (415, "Unsupported content encoding"),
    ProblemCode.IDEMPOTENCY_KEY_REUSED: (422, "Idempotency key reused"),
    ProblemCode.UPSTREAM_UNREACHABLE: (502, "Upstream unreachable"),
    ProblemCode.UPSTREAM_DISCONNECTED: (502, "Upstream connection lost"),
    ProblemCode.STORE_UNAVAILABLE: (503, "Store unavailable"),
    ProblemCode.STORE_NOT_REPLICATED: (503, "Store not replicated"),
    ProblemCode.STORE_UNSAFE: (503, "Store may lose records"),
    ProblemCode.STORE_RECORDS_LOST: (503, "Store lost records"),
    ProblemCode.SHUTTING_DOWN: (503, "Shutting down"),
    ProblemCode.AGENT_PAUSED: (503, "Agent paused"),
    ProblemCode.UPSTREAM_TIMEOUT: (504, "Upstream timeout"),
    ProblemCode.FORGED_COMPENSATION: (403, "Forged compensation"),
    ProblemCode.EFFECT_COMPENSATED: (409, "Effect compensated"),
    ProblemCode.APPROVAL_REQUIRED: (428, "Approval required"),
    ProblemCode.APPROVAL_EXPIRED: (428, "Approval expired"),
    ProblemCode.APPROVAL_DENIED: (403, "Approval denied"),
    ProblemCode.UNAUTHORIZED: (401, "Unauthorized"),
    ProblemCode.FOREIGN_HOST: (403, "Foreign Host"),
    ProblemCode.CROSS_ORIGIN_REQUEST: (403, "Cross-origin request"),
    ProblemCode.UNSUPPORTED_MEDIA_TYPE: (415, "Unsupported media type"),
    ProblemCode.NOT_FOUND: (404, "Not found"),
    ProblemCode.STATE_CONFLICT: (409, "Conflicts with the current state"),
    ProblemCode.RATE_LIMITED: (429, "Too many recovery actions"),
}

# Answers a client retry can change: nothing was sent, or the store or holder may soon be back.
# A refusal that names a Retry-After is retryable too. Every other refusal tells SDK retry
# loops to stop, since a retry gets the same answer.
_RETRYABLE = frozenset(
    {
        ProblemCode.REQUEST_IN_PROGRESS,
        ProblemCode.UPSTREAM_UNREACHABLE,
        ProblemCode.STORE_UNAVAILABLE,
        ProblemCode.STORE_NOT_REPLICATED,
        ProblemCode.SHUTTING_DOWN,
        ProblemCode.RATE_LIMITED,
    }
)

# Answers that wait for a person: their Retry-After says when asking again is worth it, but an
# SDK's own retry loop would only spend its retries within seconds, so it is told to stop.
_WAIT_FOR_PEOPLE = frozenset({ProblemCode.APPROVAL_REQUIRED, ProblemCode.APPROVAL_EXPIRED})


def problem_status(code: ProblemCode) -> int:
    """The HTTP status a refusal with ``code`` is answered with, for pages that show it as HTML
    (the operator console)."""
    return _STATUS[code][0]


def should_retry_headers(retry: bool) -> dict[str, str]:
    """The headers OpenAI/Anthropic (x-should-retry) and Stripe SDKs obey."""
    value = "true" if retry else "false"
    return {"x-should-retry": value, "Stripe-Should-Retry": value}


def problem_response(
    code: ProblemCode,
    detail: str,
    *,
    effect_key: str | None = None,
    retry_after_s: int | None = None,
    extra: dict[str, Any] | None = None,
) -> web.Response:
    status, document, headers = _problem(code, detail, effect_key, retry_after_s, extra)
    return web.Response(
        status=status,
        body=orjson.dumps(document),
        content_type=PROBLEM_CONTENT_TYPE,
        headers=headers,
    )


def jsonrpc_problem_response(
    request_id: RequestId,
    code: ProblemCode,
    detail: str,
    *,
    effect_key: str | None = None,
    retry_after_s: int | None = None,
    extra: dict[str, Any] | None = None,
) -> web.Response:
    """The refusal of a JSON-RPC request: the same status and headers as a problem document,
    with the document carried as the ``data`` of a JSON-RPC error answering ``request_id``. An
    MCP client reads a JSON-RPC error from a non-2xx answer and hands it to the call that sent
    the request; a problem document it would only report as "the server returned an error"."""
    status, document, headers = _problem(code, detail, effect_key, retry_after_s, extra)
    return web.Response(
        status=status,
        body=jsonrpc.error(request_id, PROXY_REFUSED_ERROR, detail, {"code": code, **document}),
        content_type=JSON_CONTENT_TYPE,
        headers=headers,
    )


def _problem(
    code: ProblemCode,
    detail: str,
    effect_key: str | None,
    retry_after_s: int | None,
    extra: dict[str, Any] | None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    status, title = _STATUS[code]
    document: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if effect_key is not None:
        document["effect_key"] = effect_key
    document.update(extra or {})
    retryable = code in _RETRYABLE or (retry_after_s is not None and code not in _WAIT_FOR_PEOPLE)
    headers = {"Idem-Outcome": str(code), **should_retry_headers(retryable)}
    if effect_key is not None:
        headers["Idem-Key"] = effect_key
    if retry_after_s is not None:
        headers["Retry-After"] = str(retry_after_s)
    if code is ProblemCode.UNSUPPORTED_CONTENT_ENCODING:
        headers["Accept-Encoding"] = ACCEPTED  # what to send instead (RFC 9110 section 12.5.3)
    if code is ProblemCode.UNSUPPORTED_MEDIA_TYPE:
        headers["Accept"] = JSON_CONTENT_TYPE  # likewise (RFC 9110 section 15.5.16)
    return status, document, headers
