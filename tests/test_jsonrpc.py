"""JSON-RPC messages as MCP's streamable HTTP carries them."""

from __future__ import annotations

import orjson
import pytest

from idemproxy import jsonrpc
from idemproxy.jsonrpc import Batch, Message


def test_a_request_a_notification_and_an_answer_are_told_apart() -> None:
    call = jsonrpc.parse(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}')
    assert call == Message("tools/call", has_id=True, id=7, params={"name": "x"})
    assert call.is_request
    note = jsonrpc.parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(note, Message)
    assert not note.is_request
    answer = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"s-1","result":{}}')
    assert isinstance(answer, Message)
    assert answer.method is None
    assert answer.id == "s-1"


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"id":1,"method":"ping"}', b'{"jsonrpc":"2.0","method":5}', b"[1]"],
)
def test_what_is_no_json_rpc_is_none(body: bytes) -> None:
    assert jsonrpc.parse(body) is None


def test_a_batch_keeps_its_messages_in_order() -> None:
    batch = jsonrpc.parse(
        b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]'
    )
    assert isinstance(batch, Batch)
    assert [m.method for m in batch.messages] == ["a", "tools/call"]


def test_a_boolean_id_is_no_id() -> None:
    message = jsonrpc.parse(b'{"jsonrpc":"2.0","id":true,"method":"ping"}')
    assert isinstance(message, Message)
    assert message.has_id
    assert message.id is None


ANSWER = {"jsonrpc": "2.0", "id": 3, "result": {"content": [], "isError": False}}


def test_the_answer_in_a_json_body() -> None:
    assert jsonrpc.answer_to(orjson.dumps(ANSWER), "application/json", 3) == ANSWER
    assert jsonrpc.answer_to(orjson.dumps(ANSWER), "application/json", 4) is None


def test_the_answer_after_the_notifications_of_an_event_stream() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"p": 1}}
    ask = {"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": {}}
    stream = (
        b"event: message\r\ndata: " + orjson.dumps(progress) + b"\r\n\r\n"
        b": a comment\n\n"
        b"id: 9\ndata: " + orjson.dumps(ask) + b"\n\n"
        b"event: message\ndata: " + orjson.dumps(ANSWER) + b"\n\n"
    )
    # The server's own request with the same id is no answer to ours.
    assert jsonrpc.answer_to(stream, "text/event-stream; charset=utf-8", 3) == ANSWER


def test_an_answer_split_over_data_lines_is_joined() -> None:
    stream = b"data: {\ndata: " + orjson.dumps(ANSWER)[1:] + b"\n\n"
    assert jsonrpc.answer_to(stream, "text/event-stream", 3) == ANSWER


def test_a_stream_cut_inside_the_answer_event_has_no_answer() -> None:
    stream = b"event: message\ndata: " + orjson.dumps(ANSWER) + b"\n"
    assert jsonrpc.answer_to(stream, "text/event-stream", 3) is None


def test_an_error_answers_too() -> None:
    error = orjson.loads(jsonrpc.error(3, -32602, "bad", {"why": "x"}))
    assert jsonrpc.answer_to(orjson.dumps(error), "application/json", 3) == error
    assert jsonrpc.error_code(error) == -32602
    assert error["error"]["data"] == {"why": "x"}
    assert jsonrpc.error_code(ANSWER) is None


def test_an_answer_takes_the_new_request_id() -> None:
    assert orjson.loads(jsonrpc.with_id(ANSWER, "new-1")) == {**ANSWER, "id": "new-1"}


def test_result_of_what_has_none() -> None:
    assert jsonrpc.result_of({"result": []}) == {}
    assert jsonrpc.error_code({"error": {"code": True}}) is None


def test_a_failed_answer_and_what_it_says() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
    tool_error = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"isError": True, "content": [{"type": "text", "text": "no"}, {"text": "quota"}]},
    }
    assert jsonrpc.failed(error)
    assert jsonrpc.failed(tool_error)
    assert not jsonrpc.failed(ANSWER)
    assert jsonrpc.error_text(error) == "boom"
    assert jsonrpc.error_text(tool_error) == "no quota"
