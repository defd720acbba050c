"""Compensations of MCP tool calls: the call of another tool, filled from the recorded answer."""

from __future__ import annotations

from collections.abc import Mapping

import orjson
import pytest

from idemproxy.ledger.compensator import Compensator, Outgoing, Sent, UndoState
from idemproxy.ledger.tool_compensation import (
    COMPENSATION_ID,
    answer_failed,
    called_tool,
    tool_call_body,
)
from idemproxy.policies.loader import parse_policy
from idemproxy.policies.mcp import ToolCompensation
from idemproxy.policies.placeholders import MissingValue
from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState, StoredResponse

POLICY = parse_policy(
    """\
name: tools
mcp:
  tools:
    - name: send_message
      compensation:
        tool: delete_message
        arguments: {id: "{response./result/structuredContent/id}", reason: compensation}
    - {name: read_count, effect: safe}
routes: [{name: stream, match: {methods: [GET, DELETE]}, effect: safe}]
default: {name: mcp}
""",
    "tools.yaml",
)
SENT = {"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": {"id": "m-17"}, "content": []}}


class NothingSent:
    async def send(self, outgoing: Outgoing, credentials: Mapping[str, str]) -> Sent:
        pytest.fail(f"planning sent {outgoing}")


def record(path: str, answer: Mapping[str, object], tool_call: str = "call-1") -> EffectRecord:
    meta = EffectMeta("batch-1", tool_call, "send_message", "tools", "POST", path)
    response = StoredResponse(200, (("Content-Type", "application/json"),), orjson.dumps(answer))
    key = RecordKey("bot", f"tc:batch-1:{tool_call}:d-0")
    return EffectRecord(key, RecordState.COMPLETED, 1, "fp", meta, response=response)


def test_a_record_path_names_its_tool() -> None:
    assert called_tool("/mcp#send_message") == ("/mcp", "send_message")
    assert called_tool("/v1/refunds") is None
    assert called_tool("/mcp#") is None


def test_the_undoing_call_is_filled_from_the_answer() -> None:
    compensation = ToolCompensation(
        tool="delete_message", arguments={"id": "{response./result/structuredContent/id}"}
    )
    body = orjson.loads(tool_call_body(record("/mcp#send_message", SENT), compensation))
    assert body == {
        "jsonrpc": "2.0",
        "id": COMPENSATION_ID,
        "method": "tools/call",
        "params": {"name": "delete_message", "arguments": {"id": "m-17"}},
    }
    with pytest.raises(MissingValue):
        tool_call_body(record("/mcp#send_message", {"result": {}}), compensation)


def test_the_plan_calls_the_undoing_tool_at_the_endpoint() -> None:
    item = Compensator({"tools": POLICY}, NothingSent()).plan_item(
        record("/mcp#send_message", SENT), None
    )
    assert item.undo.state is UndoState.PLANNED
    assert item.undo.request == "tools/call delete_message"
    assert item.outgoing is not None
    assert (item.outgoing.method, item.outgoing.path, item.outgoing.mcp) == ("POST", "/mcp", True)
    headers = dict(item.outgoing.headers)
    assert headers["Idem-Compensates"] == "bot/tc:batch-1:call-1:d-0"
    assert headers["Accept"] == "application/json, text/event-stream"
    arguments = orjson.loads(item.outgoing.body)["params"]["arguments"]
    assert arguments == {"id": "m-17", "reason": "compensation"}


def test_a_tool_without_a_compensation_cannot_be_undone() -> None:
    item = Compensator({"tools": POLICY}, NothingSent()).plan_item(
        record("/mcp#other_tool", SENT), None
    )
    assert item.undo.state is UndoState.CANNOT
    assert "tool 'other_tool' declares no compensation" in item.undo.detail


def test_an_answer_without_the_value_is_a_policy_to_fix() -> None:
    item = Compensator({"tools": POLICY}, NothingSent()).plan_item(
        record("/mcp#send_message", {"result": {"content": []}}), None
    )
    assert item.undo.state is UndoState.INVALID
    assert "fix the policy's compensation" in item.undo.detail


def test_a_compensation_whose_tool_answered_an_error_is_not_done() -> None:
    failed = {"jsonrpc": "2.0", "id": COMPENSATION_ID, "result": {"isError": True, "content": []}}
    done = record("/mcp#delete_message", failed, tool_call="compensate:call-1")
    assert answer_failed(done)
    item = Compensator({"tools": POLICY}, NothingSent()).plan_item(
        record("/mcp#send_message", SENT), done
    )
    assert item.undo.state is UndoState.PLANNED
    ok = record("/mcp#delete_message", {"jsonrpc": "2.0", "id": COMPENSATION_ID, "result": {}})
    assert not answer_failed(ok)
    item = Compensator({"tools": POLICY}, NothingSent()).plan_item(
        record("/mcp#send_message", SENT), ok
    )
    assert item.undo.state is UndoState.UNDONE


def test_an_http_record_is_never_read_as_a_tool_answer() -> None:
    assert not answer_failed(record("/v1/refunds", {"error": {"code": 1}}))
