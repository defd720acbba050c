"""Forwarding without a record: event streams are known to the process, answers inspected."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.proxy.conftest import ProxyFactory


async def test_an_event_stream_is_held_in_streams_while_it_is_relayed(
    make_proxy: ProxyFactory,
) -> None:
    client, state = await make_proxy()
    response = await client.get("/up/sse?events=3&gap_ms=100")
    assert await response.content.readline() == b"id: 0\n"
    assert len(state.streams) == 1
    await response.read()
    assert state.streams == set()


async def test_a_plain_answer_is_no_stream(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy()
    response = await client.get("/up/big?bytes=2000000")
    first = await response.content.readany()
    # Asked while the answer is still being relayed: only an event stream is held.
    assert state.streams == set()
    assert len(first) + len(await response.read()) == 2000000


async def test_a_trusted_tools_list_is_read_as_it_passes(
    make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    policy = tmp_path / "tools.yaml"
    policy.write_text(
        "name: tools\nmcp: {trust_read_only_hint: true}\n"
        "routes: [{name: stream, match: {methods: [GET]}, effect: safe}]\ndefault: {name: mcp}\n"
    )
    client, _ = await make_proxy(policy=str(policy))
    listing = {"tools": [{"name": "send_message", "annotations": {"readOnlyHint": True}}]}
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    await client.post("/up/mcp", params={"answer": orjson.dumps(listing).decode()}, data=body)
    call = {"name": "send_message", "arguments": {}}
    request = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    # No key, yet not refused: the server's hint, trusted by the policy, says it only reads.
    response = await client.post("/up/mcp", data=request)
    assert response.status == 200
    assert response.headers["Idem-Outcome"] == "forwarded"
