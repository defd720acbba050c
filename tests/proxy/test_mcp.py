"""An MCP upstream through the in-process proxy, against the fake JSON-RPC endpoint of
tests/support/upstream.py: the faults the real SDK server (tests/e2e/test_mcp.py) cannot be made
to show, and every branch of the handler's MCP path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import EventType
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

KEY = {"dev.idemproxy/batch": "b-1", "dev.idemproxy/toolCall": "call-1"}


def tools_call(request_id: object, meta: dict[str, str] | None = KEY, **arguments: object) -> bytes:
    params: dict[str, Any] = {"name": "send_message", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return orjson.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    )


JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def test_a_repeat_under_a_new_id_is_replayed_under_that_id(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    first = await client.post("/up/mcp", data=tools_call(1, text="hi"), headers=JSON)
    assert first.status == 200
    assert (await first.json())["id"] == 1
    headers = {**JSON, "Mcp-Session-Id": "session-2"}
    again = await client.post("/up/mcp", data=tools_call("x-7", text="hi"), headers=headers)
    answer = await again.json()
    assert answer == {
        "jsonrpc": "2.0",
        "id": "x-7",
        "result": {"content": [{"type": "text", "text": "n=1"}]},
    }
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Idem-Outcome"] == "replayed"
    assert again.headers["Mcp-Session-Id"] == "session-2"
    assert effects.count("/mcp") == 1


async def test_other_arguments_are_another_call(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    await client.post("/up/mcp", data=tools_call(1, text="hi"), headers=JSON)
    other = await client.post("/up/mcp", data=tools_call(2, text="bye"), headers=JSON)
    assert (await other.json())["result"]["content"][0]["text"] == "n=2"
    assert effects.count("/mcp") == 2


async def test_concurrent_duplicates_act_once_each_with_its_own_id(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")

    async def one(request_id: int) -> tuple[dict[str, Any], str]:
        response = await client.post(
            "/up/mcp?sse=1", data=tools_call(request_id, text="hi"), headers=JSON
        )
        if response.content_type == "text/event-stream":
            events = (await response.read()).split(b"\n\n")
            answer = orjson.loads(events[-2].split(b"data: ", 1)[1])
        else:
            answer = await response.json()
        return answer, response.headers["Idem-Outcome"]

    answers = await asyncio.gather(*(one(n) for n in range(10)))
    assert [answer["id"] for answer, _ in answers] == list(range(10))
    assert all(answer["result"]["content"][0]["text"] == "n=1" for answer, _ in answers)
    assert sorted(outcome for _, outcome in answers).count("forwarded") == 1
    assert effects.count("/mcp") == 1


async def test_a_stream_cut_before_the_answer_is_unknown_and_never_resent(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, policy="mcp")
    cut = await client.post("/up/mcp?sse=1&cut=1", data=tools_call(1, text="hi"), headers=JSON)
    with pytest.raises(aiohttp.ClientPayloadError):
        await cut.read()  # passed on as cut: it must not look complete
    [record] = await store.list_unknown("default")
    assert record.meta.batch == "b-1"
    assert record.meta.action == "send_message"
    assert "broke off" in record.reason
    again = await client.post("/up/mcp", data=tools_call(2, text="hi"), headers=JSON)
    assert again.status == 409
    answer = await again.json()
    assert answer["id"] == 2
    assert answer["error"]["data"]["code"] == "outcome-unknown"
    assert effects.count("/mcp") == 1


async def test_protocol_messages_pass_unrecorded(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    for method in ("initialize", "tools/list", "ping"):
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method})
        response = await client.post("/up/mcp", data=body, headers=JSON)
        assert response.status == 200
        assert response.headers["Idem-Outcome"] == "forwarded"
    assert effects.count("/mcp") == 0


async def test_a_call_without_a_key_is_refused_as_a_json_rpc_error(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    response = await client.post("/up/mcp", data=tools_call(5, meta=None, text="hi"), headers=JSON)
    assert response.status == 400
    assert response.content_type == "application/json"
    answer = await response.json()
    assert answer["id"] == 5
    assert answer["error"]["data"]["code"] == "missing-idempotency-key"
    assert "dev.idemproxy/batch" in answer["error"]["message"]
    assert effects.count("/mcp") == 0


async def test_the_connection_headers_key_a_call_too(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    headers = {**JSON, "Idem-Batch": "b-9", "Idem-Tool-Call": "c-9"}
    for request_id in (1, 2):
        await client.post(
            "/up/mcp", data=tools_call(request_id, meta=None, text="hi"), headers=headers
        )
    assert effects.count("/mcp") == 1


async def test_a_json_rpc_batch_with_a_tool_call_is_refused(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    batch = b"[" + tools_call(1, text="hi") + b"]"
    response = await client.post("/up/mcp", data=batch, headers=JSON)
    assert response.status == 400
    assert "POST of its own" in (await response.text())
    assert effects.count("/mcp") == 0


async def test_an_is_error_result_is_recorded_and_replayed(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    failed = '{"isError": true, "content": [{"type": "text", "text": "quota"}]}'
    for request_id in (1, 2):
        response = await client.post(
            "/up/mcp",
            params={"answer": failed},
            data=tools_call(request_id, text="hi"),
            headers=JSON,
        )
        assert (await response.json())["result"]["isError"] is True
    assert effects.count("/mcp") == 1


async def test_asking_for_input_is_not_recorded(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    ask = '{"resultType": "input_required", "requestState": "s-1"}'
    await client.post(
        "/up/mcp", params={"answer": ask}, data=tools_call(1, text="hi"), headers=JSON
    )
    answered = await client.post("/up/mcp", data=tools_call(2, text="hi"), headers=JSON)
    assert answered.headers["Idem-Outcome"] == "forwarded"
    assert effects.count("/mcp") == 2


async def test_what_is_no_json_rpc_goes_to_the_server(make_proxy: ProxyFactory) -> None:
    client, _ = await make_proxy(policy="mcp")
    response = await client.get("/up/sse?events=1&gap_ms=1")
    assert response.status == 200
    assert response.headers["Idem-Outcome"] == "forwarded"


NAMED = """\
name: tools
mcp:
  tools:
    - {name: send_message}
    - {name: read_count, effect: safe}
routes: [{name: stream, match: {methods: [GET, DELETE]}, effect: safe}]
default: {name: mcp}
"""


def answered(state: Any, route: str, outcome: str) -> float:
    labels = {"upstream": "up", "route": route, "outcome": outcome}
    return state.metrics.registry.get_sample_value("idemproxy_requests_total", labels) or 0.0


async def test_metrics_name_the_tools_the_policy_names_and_no_other(
    make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    policy = tmp_path / "tools.yaml"
    policy.write_text(NAMED)
    client, state = await make_proxy(policy=str(policy))
    await client.post("/up/mcp", data=tools_call(1, text="hi"), headers=JSON)
    await client.post("/up/mcp", data=tools_call(2, text="hi"), headers=JSON)
    other = orjson.loads(tools_call(3, text="hi"))
    other["params"]["name"] = "server_invented_tool_name"
    await client.post("/up/mcp", data=orjson.dumps(other), headers=JSON)
    await client.post("/up/mcp", data=b'{"jsonrpc":"2.0","id":4,"method":"ping"}', headers=JSON)
    refused = orjson.loads(tools_call(5, meta=None, text="hi"))
    await client.post("/up/mcp", data=orjson.dumps(refused), headers=JSON)
    assert answered(state, "send_message", "forwarded") == 1
    assert answered(state, "send_message", "replayed") == 1
    assert answered(state, "send_message", "missing-idempotency-key") == 1
    assert answered(state, "mcp", "forwarded") == 1
    assert answered(state, "rpc", "forwarded") == 1
    blocked = {"upstream": "up", "route": "send_message", "kind": "replayed", "agent": "default"}
    assert (
        state.metrics.registry.get_sample_value("idemproxy_duplicates_blocked_total", blocked) == 1
    )


async def test_a_tool_call_s_events_name_its_tool(make_proxy: ProxyFactory) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, policy="mcp")
    await client.post("/up/mcp", data=tools_call(1, text="hi"), headers=JSON)
    [event] = await store.read_events("default")
    assert event.type is EventType.COMPLETED
    assert (event.meta.method, event.meta.path, event.meta.action) == (
        "POST",
        "/mcp#send_message",
        "send_message",
    )
    assert (event.meta.batch, event.meta.tool_call) == ("b-1", "call-1")


async def test_tool_errors_count_toward_the_agent_s_pause(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp", **{"recovery.pause_after_failures": 2})
    failed = '{"isError": true, "content": [{"type": "text", "text": "quota"}]}'
    for n in (1, 2):
        meta = {"dev.idemproxy/batch": "b-1", "dev.idemproxy/toolCall": f"call-{n}"}
        await client.post(
            "/up/mcp", params={"answer": failed}, data=tools_call(n, meta, text="hi"), headers=JSON
        )
    meta = {"dev.idemproxy/batch": "b-1", "dev.idemproxy/toolCall": "call-3"}
    paused = await client.post("/up/mcp", data=tools_call(3, meta, text="hi"), headers=JSON)
    assert paused.status == 503
    answer = await paused.json()
    assert answer["id"] == 3
    assert answer["error"]["data"]["code"] == "agent-paused"
    assert "quota" in answer["error"]["message"]
    assert effects.count("/mcp") == 2
