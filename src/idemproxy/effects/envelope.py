"""How an effect's answers are framed: as the upstream sent them (HTTP), or as the answer to one
JSON-RPC request (an MCP tool call).

An HTTP answer is recorded and replayed byte for byte. An MCP answer is the JSON-RPC message
that answers the call, wherever it came: a JSON body, or one event of an SSE stream after the
server's progress notifications. Only that message is recorded, and a repeat gets it under its
*own* JSON-RPC id, since an MCP client drops an answer whose id is not its request's. Refusals
of a JSON-RPC request are JSON-RPC errors, which the client hands to the call that sent it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from idemproxy import jsonrpc
from idemproxy.effects.status import external_id, settlement_for
from idemproxy.encodings import UndecodableBody
from idemproxy.errors import RequestRefused
from idemproxy.jsonrpc import RequestId
from idemproxy.policies.route import Route
from idemproxy.proxy.problems import (
    JSON_CONTENT_TYPE,
    PROBLEM_TYPE_BASE,
    PROXY_REFUSED_ERROR,
    jsonrpc_problem_response,
    problem_response,
)
from idemproxy.proxy.relay import Relayed
from idemproxy.recorded import readable_body
from idemproxy.store.records import (
    ANSWER_FAILED_HEADER,
    RecordState,
    Settlement,
    StoredResponse,
)

# Whether the outcome counts toward the agent's failure streak: an answer that only asks for
# more input is no failure.
Settled = tuple[Settlement, bool]
SESSION_HEADER = "Mcp-Session-Id"
_JSON_HEADERS = (("Content-Type", JSON_CONTENT_TYPE),)
_MAX_ERROR_TEXT = 160
# The error a repeat gets for a call whose answer was too large to record (beside the
# proxy's refusals, -32030).
TOO_LARGE_ERROR = -32031
# The error a repeat gets for a call an operator resolved as applied with no answer to replay.
APPLIED_WITHOUT_ANSWER_ERROR = -32032


class Envelope:
    """HTTP: the upstream's answer is the effect's answer, recorded and replayed as it came."""

    def settlement(
        self,
        state: RecordState,
        status: int,
        headers: tuple[tuple[str, str], ...],
        relayed: Relayed,
        route: Route,
    ) -> Settled:
        """The outcome that what was relayed settles."""
        return settlement_for(state, status, headers, relayed, route), True

    def replayed(self, stored: StoredResponse) -> StoredResponse:
        """The recorded answer as this request gets it."""
        return stored

    def refusal(self, refusal: RequestRefused) -> web.Response:
        return problem_response(
            refusal.code,
            refusal.detail,
            effect_key=refusal.effect_key,
            retry_after_s=refusal.retry_after_s,
            extra=refusal.extra,
        )


HTTP = Envelope()


@dataclass(frozen=True, slots=True)
class JsonRpcEnvelope(Envelope):
    """The answer to the JSON-RPC request ``request_id`` of an MCP client."""

    request_id: RequestId
    session_id: str | None = None
    not_applied_errors: tuple[int, ...] = ()
    limit_bytes: int = 8 * 1024 * 1024

    def settlement(
        self,
        state: RecordState,
        status: int,
        headers: tuple[tuple[str, str], ...],
        relayed: Relayed,
        route: Route,
    ) -> Settled:
        if state is RecordState.COMPLETED and not 200 <= status < 300:
            # The server refused the message itself (an unknown session, a bad request):
            # no tool ran, and a repeat in a good session may be sent.
            reason = f"the MCP server refused the message with HTTP {status}; no tool ran"
            return Settlement(RecordState.NOT_APPLIED, reason=reason, ttl_s=route.ttl_s), True
        if state is not RecordState.COMPLETED:
            return settlement_for(state, status, headers, relayed, route), True
        answer = self._answer(status, headers, relayed)
        if answer is None:
            return self._without_answer(status, relayed, route), True
        if jsonrpc.result_of(answer).get("resultType") == "input_required":
            reason = "the tool asked for more input (input_required); its retry is the effect"
            return Settlement(RecordState.NOT_APPLIED, reason=reason, ttl_s=route.ttl_s), False
        code = jsonrpc.error_code(answer)
        if code is not None and code in self.not_applied_errors:
            said = _message(answer)
            reason = f"the MCP server answered JSON-RPC error {code} ({said}): no tool ran"
            return Settlement(RecordState.NOT_APPLIED, reason=reason, ttl_s=route.ttl_s), True
        return _completed(status, answer, route), True

    def replayed(self, stored: StoredResponse) -> StoredResponse:
        answer = self._recorded_answer(stored) or _framed(stored)
        headers: tuple[tuple[str, str], ...] = _JSON_HEADERS
        if self.session_id is not None:
            headers = (*headers, (SESSION_HEADER, self.session_id))
        return StoredResponse(stored.status, headers, jsonrpc.with_id(answer, self.request_id))

    def refusal(self, refusal: RequestRefused) -> web.Response:
        return jsonrpc_problem_response(
            self.request_id,
            refusal.code,
            refusal.detail,
            effect_key=refusal.effect_key,
            retry_after_s=refusal.retry_after_s,
            extra=refusal.extra,
        )

    def _answer(
        self, status: int, headers: tuple[tuple[str, str], ...], relayed: Relayed
    ) -> dict[str, Any] | None:
        stored = StoredResponse(status, headers, relayed.body, body_truncated=relayed.truncated)
        try:
            body = readable_body(stored, self.limit_bytes)
        except UndecodableBody:
            return None
        content_type = next((v for k, v in headers if k.lower() == "content-type"), "")
        return jsonrpc.answer_to(body, content_type, self.request_id)

    def _recorded_answer(self, stored: StoredResponse) -> dict[str, Any] | None:
        try:
            document = orjson.loads(readable_body(stored, self.limit_bytes))
        except (UndecodableBody, orjson.JSONDecodeError):
            return None
        if isinstance(document, dict) and ("result" in document or "error" in document):
            return document
        return None

    def _without_answer(self, status: int, relayed: Relayed, route: Route) -> Settlement:
        if relayed.truncated and relayed.complete:
            # The tool ran to its end; only its answer was too large to keep.
            note = (
                f"the tool ran, but its answer passed the route's max_recorded_bytes"
                f" ({route.max_recorded_bytes}) and was not kept; raise max_recorded_bytes"
            )
            error = {"code": TOO_LARGE_ERROR, "message": note}
            answer = {"jsonrpc": jsonrpc.JSONRPC_VERSION, "error": error}
            return _completed(status, answer, route)
        reason = (
            "the answer stream broke off before the tool's result arrived"
            if not relayed.complete
            else "the server's answer ended without the tool's result"
        )
        return Settlement(RecordState.UNKNOWN, reason=reason, ttl_s=route.ttl_s)


def _framed(stored: StoredResponse) -> dict[str, Any]:
    """A recorded answer that is none of the tool's, as a JSON-RPC error carrying what the
    record holds: no result can be made up for a tool (a 2026-07-28 client wants resultType, a
    tool with an output schema its structured content).

    - below 400, an effect an operator resolved as applied with nothing to replay: the error
      says the tool ran, so the agent does not run it another way;
    - from 400, a refusal the record now holds (409 effect-compensated): its problem document.
    """
    text = stored.body.decode("utf-8", "replace")
    try:
        document: Any = orjson.loads(stored.body)
    except orjson.JSONDecodeError:
        document = {"note": text}
    if not isinstance(document, dict):
        document = {"note": text}
    if stored.status < 400:
        note = document.get("note") or "resolved as applied"
        message = f"the tool ran, but its answer was not recorded: {note}"
        error = {"code": APPLIED_WITHOUT_ANSWER_ERROR, "message": message, "data": document}
    else:
        detail = str(document.get("detail", text))
        kind = str(document.get("type", ""))
        if kind.startswith(PROBLEM_TYPE_BASE):  # as a refusal's data says which (problems.py)
            document = {"code": kind.removeprefix(PROBLEM_TYPE_BASE), **document}
        error = {"code": PROXY_REFUSED_ERROR, "message": detail, "data": document}
    return {"jsonrpc": jsonrpc.JSONRPC_VERSION, "error": error}


def _completed(status: int, answer: dict[str, Any], route: Route) -> Settlement:
    failed = jsonrpc.failed(answer)
    headers = (*_JSON_HEADERS, (ANSWER_FAILED_HEADER, "true")) if failed else _JSON_HEADERS
    response = StoredResponse(status, headers, orjson.dumps(answer))
    return Settlement(
        RecordState.COMPLETED,
        response=response,
        external_id=external_id(response, route),
        reason=f"the tool answered an error: {_message(answer)}" if failed else "",
        ttl_s=route.ttl_s,
    )


def _message(answer: dict[str, Any]) -> str:
    """What an error answer says, cut short: a JSON-RPC error's message, or the text of an
    ``isError`` result."""
    text = jsonrpc.error_text(answer)
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"
