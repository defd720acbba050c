"""Which MCP messages are effects, and what identifies a tool call."""

from __future__ import annotations

import orjson
import pytest

from idemproxy.effectkeys import KeyHeaders
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.jsonrpc import Batch, Message, parse
from idemproxy.mcpcalls import (
    RPC_ROUTE,
    McpClassifier,
    ToolCall,
    check_routing_headers,
    missing_key,
)
from idemproxy.policies.kinds import EffectClass, ToolCallEffects
from idemproxy.policies.mcp import McpRules, McpTool, ToolEffect
from idemproxy.policies.route import Route

RULES = McpRules(
    tools=(
        McpTool(name="read_count", effect=ToolEffect.SAFE),
        McpTool(name="send_message", volatile_arguments=("/sent_at",)),
    )
)
ROUTE = Route(name="mcp", volatile_fields=("/params/x",))
NO_HEADERS = KeyHeaders()


def message(method: str, params: dict[str, object], request_id: object = 1) -> Message | Batch:
    parsed = parse(
        orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    )
    assert parsed is not None
    return parsed


def call(classifier: McpClassifier, tool: str, arguments: object, **params: object) -> ToolCall:
    found = classifier.tool_call(
        message("tools/call", {"name": tool, "arguments": arguments, **params}), ROUTE, NO_HEADERS
    )
    assert found is not None
    return found


@pytest.mark.parametrize(
    "method",
    ["initialize", "server/discover", "tools/list", "resources/read", "prompts/get", "ping"],
)
def test_protocol_messages_are_no_effects(method: str) -> None:
    assert McpClassifier(RULES).tool_call(message(method, {}), ROUTE, NO_HEADERS) is None


def test_a_notification_and_an_answer_to_the_server_are_no_effects() -> None:
    classifier = McpClassifier(RULES)
    note = parse(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}')
    answer = parse(b'{"jsonrpc":"2.0","id":5,"result":{"action":"accept"}}')
    assert note is not None
    assert answer is not None
    assert classifier.tool_call(note, ROUTE, NO_HEADERS) is None
    assert classifier.tool_call(answer, ROUTE, NO_HEADERS) is None


def test_a_tool_call_without_an_id_is_refused() -> None:
    """A server acts on a JSON-RPC notification without answering: nothing would record it."""
    note = parse(b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"send_message"}}')
    assert note is not None
    with pytest.raises(RequestRefused, match="must carry a JSON-RPC id"):
        McpClassifier(RULES).tool_call(note, ROUTE, NO_HEADERS)
    in_batch = parse(b'[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}]')
    assert in_batch is not None
    with pytest.raises(RequestRefused, match="POST of its own"):
        McpClassifier(RULES).tool_call(in_batch, ROUTE, NO_HEADERS)


def test_a_tool_named_safe_passes_and_any_other_acts() -> None:
    classifier = McpClassifier(RULES)
    assert (
        classifier.tool_call(message("tools/call", {"name": "read_count"}), ROUTE, NO_HEADERS)
        is None
    )
    assert call(classifier, "delete_everything", {}).route.name == "mcp"


def test_the_json_rpc_id_and_meta_are_not_the_call() -> None:
    classifier = McpClassifier(RULES)
    first = classifier.tool_call(
        message("tools/call", {"name": "send_message", "arguments": {"text": "hi", "n": 1}}, 1),
        ROUTE,
        NO_HEADERS,
    )
    again = classifier.tool_call(
        message(
            "tools/call",
            {
                "_meta": {"progressToken": 9},
                "arguments": {"n": 1, "text": "hi"},
                "name": "send_message",
            },
            "resumed-77",
        ),
        ROUTE,
        NO_HEADERS,
    )
    assert first is not None
    assert again is not None
    assert orjson.loads(first.identity) == orjson.loads(again.identity)
    assert orjson.loads(first.identity) == {
        "name": "send_message",
        "arguments": {"text": "hi", "n": 1},
    }


def test_a_named_tool_is_recorded_under_its_name_with_its_volatile_arguments() -> None:
    found = call(McpClassifier(RULES), "send_message", {"text": "hi", "sent_at": "now"})
    assert found.route.name == "send_message"
    assert found.volatile_fields == ("/arguments/sent_at",)
    assert found.route.effect is EffectClass.EXTERNAL


def test_an_unnamed_tool_keeps_the_route_but_not_its_body_pointers() -> None:
    route = ROUTE.model_copy(update={"tool_call_effects": ToolCallEffects.ONE})
    found = McpClassifier(RULES).tool_call(
        message("tools/call", {"name": "other", "arguments": {}}), route, NO_HEADERS
    )
    assert found is not None
    assert found.route.name == "mcp"
    assert found.volatile_fields == ()
    assert found.route.tool_call_effects is ToolCallEffects.MANY


def test_the_call_carries_its_key_in_meta_over_the_connections_headers() -> None:
    headers = KeyHeaders(batch="batch-from-header", tool_call="call-from-header")
    meta = {"dev.idemproxy/toolCall": "call-9", "dev.idemproxy/step": "s1"}
    found = McpClassifier(RULES).tool_call(
        message("tools/call", {"name": "send_message", "arguments": {}, "_meta": meta}),
        ROUTE,
        headers,
    )
    assert found is not None
    assert found.headers == KeyHeaders(
        batch="batch-from-header", tool_call="call-9", step="s1", action="send_message"
    )


def test_an_idempotency_key_parameter_is_an_explicit_key() -> None:
    found = call(McpClassifier(RULES), "send_message", {}, idempotencyKey="k-1")
    assert found.headers.idempotency_key == "k-1"


def test_a_key_that_is_no_string_is_refused() -> None:
    with pytest.raises(RequestRefused, match="must be a string") as refused:
        call(McpClassifier(RULES), "send_message", {}, _meta={"dev.idemproxy/batch": 7})
    assert refused.value.code is ProblemCode.INVALID_IDEMPOTENCY_KEY


def test_a_batch_holding_a_tool_call_is_refused_and_any_other_passes() -> None:
    classifier = McpClassifier(RULES)
    safe = parse(
        b'[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":1,"method":"ping"}]'
    )
    acting = parse(b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]')
    assert safe is not None
    assert acting is not None
    assert classifier.tool_call(safe, ROUTE, NO_HEADERS) is None
    with pytest.raises(RequestRefused, match="POST of its own"):
        classifier.tool_call(acting, ROUTE, NO_HEADERS)


def test_a_call_without_a_tool_name_is_left_to_the_server() -> None:
    assert McpClassifier(RULES).tool_call(message("tools/call", {}), ROUTE, NO_HEADERS) is None


def test_a_trusted_read_only_hint_makes_a_tool_safe_once_seen() -> None:
    classifier = McpClassifier(McpRules(trust_read_only_hint=True))
    lookup = message("tools/call", {"name": "search", "arguments": {}})
    assert classifier.tool_call(lookup, ROUTE, NO_HEADERS) is not None
    listing = message("tools/list", {}, 4)
    inspect = classifier.inspector(listing)
    assert inspect is not None
    tools = [
        {"name": "search", "annotations": {"readOnlyHint": True}},
        {"name": "post", "annotations": {"readOnlyHint": False}},
    ]
    answer = {"jsonrpc": "2.0", "id": 4, "result": {"tools": tools}}
    inspect(b"data: " + orjson.dumps(answer) + b"\n\n", "text/event-stream")
    assert classifier.tool_call(lookup, ROUTE, NO_HEADERS) is None
    # The server changes its mind: the tool acts again.
    tools[0]["annotations"] = {}
    inspect(orjson.dumps(answer), "application/json")
    assert classifier.tool_call(lookup, ROUTE, NO_HEADERS) is not None


def test_hints_are_not_read_unless_trusted() -> None:
    assert McpClassifier(RULES).inspector(message("tools/list", {})) is None
    trusting = McpClassifier(McpRules(trust_read_only_hint=True))
    assert trusting.inspector(message("ping", {})) is None


def test_other_messages_pass_as_one_safe_route_and_named_safe_tools_as_theirs() -> None:
    classifier = McpClassifier(RULES)
    rpc = classifier.passed_route(ROUTE, message("ping", {}))
    assert (rpc.name, rpc.effect) == (RPC_ROUTE, EffectClass.SAFE)
    read = classifier.passed_route(ROUTE, message("tools/call", {"name": "read_count"}))
    assert (read.name, read.effect) == ("read_count", EffectClass.SAFE)
    invented = classifier.passed_route(ROUTE, message("tools/call", {"name": "whatever"}))
    assert invented.name == RPC_ROUTE
    assert classifier.passed_route(ROUTE, None) is rpc


def test_the_missing_key_refusal_says_where_an_mcp_client_puts_one() -> None:
    refusal = missing_key("send_message")
    assert refusal.code is ProblemCode.MISSING_IDEMPOTENCY_KEY
    assert "dev.idemproxy/batch" in refusal.detail
    assert "'send_message'" in refusal.detail


def test_routing_headers_must_say_what_the_body_says() -> None:
    call = message("tools/call", {"name": "send_message"})
    check_routing_headers(call, "tools/call", "send_message")
    check_routing_headers(call, None, None)
    with pytest.raises(RequestRefused, match="Mcp-Method header says 'ping'"):
        check_routing_headers(call, "ping", None)
    with pytest.raises(RequestRefused, match="Mcp-Name header says 'read_count'"):
        check_routing_headers(call, "tools/call", "read_count")
    # A body the proxy passes as harmless must not be routed as a tool call by its headers.
    with pytest.raises(RequestRefused, match="body's method is 'ping'"):
        check_routing_headers(message("ping", {}), "tools/call", "send_message")
    with pytest.raises(RequestRefused, match="body's method is None"):
        check_routing_headers(None, "tools/call", None)
    check_routing_headers(message("ping", {}), "ping", "anything")
