"""An MCP upstream through the in-process proxy, against the fake JSON-RPC endpoint of
tests/support/upstream.py: the faults the real SDK server (tests/e2e/test_mcp.py) cannot be made
to show, and every branch of the handler's MCP path."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from idemproxy.store.memory import MemoryStore
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
