"""What an MCP tool call's answer settles, and how a repeat gets it."""

from __future__ import annotations

import gzip

import orjson
import pytest

from idemproxy.effects.envelope import (
    APPLIED_WITHOUT_ANSWER_ERROR,
    HTTP,
    TOO_LARGE_ERROR,
    JsonRpcEnvelope,
    Settled,
)
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.policies.mcp import NOTHING_HAPPENED_ERRORS
from idemproxy.policies.route import Route
from idemproxy.proxy.relay import Relayed
from idemproxy.store.records import EventType, RecordState, StoredResponse

ROUTE = Route(name="send_message", external_id="/result/structuredContent/id")
ENVELOPE = JsonRpcEnvelope(3, "session-a", NOTHING_HAPPENED_ERRORS)
JSON = (("Content-Type", "application/json"),)
SSE = (("Content-Type", "text/event-stream"),)
RESULT = {
    "jsonrpc": "2.0",
    "id": 3,
    "result": {"content": [{"type": "text", "text": "sent"}], "structuredContent": {"id": "m-1"}},
}


def relayed(body: bytes, *, complete: bool = True, truncated: bool = False) -> Relayed:
    return Relayed(body, truncated=truncated, complete=complete, client_gone=False)


def settle(
    body: bytes, headers: tuple[tuple[str, str], ...] = JSON, status: int = 200, **kw: bool
) -> Settled:
    return ENVELOPE.settlement(RecordState.COMPLETED, status, headers, relayed(body, **kw), ROUTE)


def test_the_answer_of_an_event_stream_is_recorded_alone() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    stream = b"data: " + orjson.dumps(progress) + b"\n\ndata: " + orjson.dumps(RESULT) + b"\n\n"
    settlement, counted = settle(stream, SSE)
    assert counted
    assert settlement.state is RecordState.COMPLETED
    assert settlement.response is not None
    assert orjson.loads(settlement.response.body) == RESULT
    assert settlement.response.headers == JSON
    assert settlement.external_id == "m-1"
    assert settlement.event_type() is EventType.COMPLETED


def test_a_compressed_answer_is_read_decoded() -> None:
    headers = (*JSON, ("Content-Encoding", "gzip"))
    settlement, _ = settle(gzip.compress(orjson.dumps(RESULT)), headers)
    assert settlement.response is not None
    assert orjson.loads(settlement.response.body) == RESULT


def test_a_stream_cut_before_the_answer_is_unknown() -> None:
    settlement, counted = settle(b'data: {"jsonrpc":"2.0","method":"x"}\n\n', SSE, complete=False)
    assert (settlement.state, counted) == (RecordState.UNKNOWN, True)
    assert "broke off" in settlement.reason


def test_a_stream_ended_without_the_answer_is_unknown() -> None:
    settlement, _ = settle(b": keep-alive\n\n", SSE)
    assert settlement.state is RecordState.UNKNOWN
    assert "ended without" in settlement.reason


def test_an_answer_cut_after_it_arrived_is_still_the_outcome() -> None:
    settlement, _ = settle(b"data: " + orjson.dumps(RESULT) + b"\n\ndata: {", SSE, complete=False)
    assert settlement.state is RecordState.COMPLETED


def test_an_answer_too_large_to_keep_is_done_with_an_error_to_replay() -> None:
    settlement, _ = settle(orjson.dumps(RESULT)[:20], truncated=True)
    assert settlement.state is RecordState.COMPLETED
    assert settlement.response is not None
    answer = orjson.loads(settlement.response.body)
    assert answer["error"]["code"] == TOO_LARGE_ERROR
    assert "max_recorded_bytes" in answer["error"]["message"]


def test_asking_for_input_frees_the_key_and_is_no_failure() -> None:
    ask = {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"resultType": "input_required", "requestState": "s"},
    }
    settlement, counted = settle(orjson.dumps(ask))
    assert (settlement.state, counted) == (RecordState.NOT_APPLIED, False)


@pytest.mark.parametrize("code", NOTHING_HAPPENED_ERRORS)
def test_an_error_before_the_tool_ran_frees_the_key(code: int) -> None:
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": code, "message": "no such tool"}}
    settlement, counted = settle(orjson.dumps(error))
    assert (settlement.state, counted) == (RecordState.NOT_APPLIED, True)
    assert f"error {code} (no such tool)" in settlement.reason


def test_any_other_error_is_the_outcome_and_a_failure() -> None:
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "boom"}}
    settlement, _ = settle(orjson.dumps(error))
    assert settlement.state is RecordState.COMPLETED
    assert settlement.event_type() is EventType.FAILED
    assert settlement.failure() == "the tool answered an error: boom"


def test_an_is_error_result_is_the_outcome_and_a_failure() -> None:
    failed = {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"isError": True, "content": [{"type": "text", "text": "quota"}]},
    }
    settlement, _ = settle(orjson.dumps(failed))
    assert settlement.state is RecordState.COMPLETED
    assert settlement.event_type() is EventType.FAILED
    assert "quota" in settlement.reason


def test_a_message_the_server_refused_ran_no_tool() -> None:
    settlement, _ = settle(b"Bad Request: No valid session ID provided", status=400)
    assert settlement.state is RecordState.NOT_APPLIED
    assert "HTTP 400" in settlement.reason


def test_a_server_error_is_unknown_as_for_http() -> None:
    settlement, _ = ENVELOPE.settlement(RecordState.UNKNOWN, 502, JSON, relayed(b""), ROUTE)
    assert settlement.state is RecordState.UNKNOWN


def test_a_repeat_gets_the_answer_under_its_own_id_and_session() -> None:
    stored = StoredResponse(200, JSON, orjson.dumps(RESULT))
    replayed = JsonRpcEnvelope("resumed-9", "session-b").replayed(stored)
    assert orjson.loads(replayed.body) == {**RESULT, "id": "resumed-9"}
    assert replayed.headers == (*JSON, ("Mcp-Session-Id", "session-b"))
    stateless = JsonRpcEnvelope(4).replayed(stored)
    assert stateless.headers == JSON


def test_an_effect_resolved_applied_without_an_answer_replays_as_an_error_saying_so() -> None:
    """No result can be made up for it: a 2026-07-28 client wants resultType, and a tool with
    an output schema wants its structured content. The client gets an error that says the
    tool ran, and a repeat gets the same."""
    note = orjson.dumps({"applied": True, "external_id": "m-1", "note": "sent by hand"})
    replayed = JsonRpcEnvelope(5).replayed(StoredResponse(200, JSON, note))
    answer = orjson.loads(replayed.body)
    assert answer["id"] == 5
    assert "result" not in answer
    assert answer["error"]["code"] == APPLIED_WITHOUT_ANSWER_ERROR
    assert "sent by hand" in answer["error"]["message"]
    assert answer["error"]["data"] == {
        "applied": True,
        "external_id": "m-1",
        "note": "sent by hand",
    }


def test_a_refusal_is_a_json_rpc_error_with_the_problem_as_its_data() -> None:
    refusal = RequestRefused(ProblemCode.OUTCOME_UNKNOWN, "in review", effect_key="a/tc:b:c")
    response = ENVELOPE.refusal(refusal)
    assert response.status == 409
    assert response.content_type == "application/json"
    assert response.headers["Idem-Outcome"] == "outcome-unknown"
    assert response.body is not None
    answer = orjson.loads(bytes(response.body))  # type: ignore[arg-type]
    assert answer["id"] == 3
    assert answer["error"]["message"] == "in review"
    assert answer["error"]["data"]["code"] == "outcome-unknown"
    assert answer["error"]["data"]["effect_key"] == "a/tc:b:c"


def test_http_answers_are_kept_as_they_came() -> None:
    stored = StoredResponse(201, JSON, b'{"id": 1}')
    assert HTTP.replayed(stored) is stored
    assert HTTP.refusal(RequestRefused(ProblemCode.OUTCOME_UNKNOWN, "x")).content_type == (
        "application/problem+json"
    )


def test_an_effect_undone_by_its_compensation_replays_as_an_error() -> None:
    kind = "https://idemproxy.dev/problems/effect-compensated"
    problem = orjson.dumps({"type": kind, "detail": "undone by compensate:call-1", "status": 409})
    replayed = JsonRpcEnvelope(6).replayed(StoredResponse(409, JSON, problem))
    answer = orjson.loads(replayed.body)
    assert replayed.status == 409
    assert answer["id"] == 6
    assert answer["error"]["message"] == "undone by compensate:call-1"
    assert answer["error"]["data"]["status"] == 409
    assert answer["error"]["data"]["code"] == "effect-compensated"
