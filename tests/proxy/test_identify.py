"""What a request on an effectful route is: an HTTP effect, an MCP tool call, or a message."""

from __future__ import annotations

import orjson

from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

CALL = {"name": "send_message", "arguments": {"text": "hi"}}
BODY = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CALL})
KEYED = {"Idem-Batch": "b", "Idem-Tool-Call": "c", "Content-Type": "application/json"}


async def test_headers_that_name_another_message_than_the_body_are_refused(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(policy="mcp")
    ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    headers = {**KEYED, "Mcp-Method": "tools/call", "Mcp-Name": "send_message"}
    refused = await client.post("/up/mcp", data=ping, headers=headers)
    assert refused.status == 400
    answer = await refused.json()
    assert (answer["id"], answer["error"]["data"]["code"]) == (2, "invalid-request")
    sent = await client.post("/up/mcp", data=BODY, headers=headers)
    assert sent.status == 200
    assert effects.count("/mcp") == 1


async def test_an_http_effect_is_keyed_by_its_request(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    for text in ("hi", "hi", "other"):
        body = orjson.dumps({"text": text})
        await client.post("/up/messages", data=body, headers=KEYED)
    assert effects.count("/messages") == 2


async def test_an_mcp_policy_reads_http_posts_elsewhere_as_messages_too(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    """Every POST to an MCP upstream is a message: one that is no JSON-RPC passes to the
    server, which refuses it, and nothing is recorded."""
    client, _ = await make_proxy(policy="mcp")
    response = await client.post("/up/messages", data=b"not json-rpc", headers=KEYED)
    assert response.headers["Idem-Outcome"] == "forwarded"
    assert effects.count("/messages") == 1
