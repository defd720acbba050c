"""MCP answers that are not a tool's result, behind `idemproxy serve`, with the official SDK's
server: which refusals and JSON-RPC errors leave a call's key free, what a JSON-RPC batch
holding a tool call gets, and a key given as the call's ``idempotencyKey`` parameter.

Requests here are raw JSON-RPC, shaped as ``mcp.Client`` sends them in the stateless revision
(tests/support/mcp_agent.py), so each can carry what a test needs: an id of its own, headers
that disagree with the body, a batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.test_mcp import SERVER_MODES
from tests.support.mcp_agent import Key, connect, stateless_call, stateless_headers
from tests.support.mcp_upstream import McpServerProcess, client_url, mcp_proxy
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT = "mcp-agent"
KEY_HEADERS = {"Idem-Batch": "batch-raw", "Idem-Tool-Call": "call-1"}


@pytest.fixture
def stateless(tmp_path: Path) -> Iterator[tuple[McpServerProcess, ServedProxy]]:
    server = McpServerProcess(tmp_path, "stateless")
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT)
    with running(server, proxy):
        yield server, proxy


async def post(
    proxy: ServedProxy, message: Any, headers: dict[str, str]
) -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession() as session:
        url = client_url(proxy)
        async with session.post(url, data=orjson.dumps(message), headers=headers) as response:
            return response.status, dict(response.headers), orjson.loads(await response.read())


@pytest.mark.parametrize(("code", "executions"), [(-32602, 2), (-32000, 1)])
@pytest.mark.parametrize("mode", sorted(SERVER_MODES))
async def test_a_json_rpc_error_frees_the_key_only_if_its_code_says_nothing_happened(
    tmp_path: Path, mode: str, code: int, executions: int
) -> None:
    """-32602 (invalid params) is in the policy's not_applied_errors: the repeat is sent again;
    -32000 (a server's own error) may come from a tool that acted: it is the outcome."""
    server = McpServerProcess(tmp_path, SERVER_MODES[mode])
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT)
    key = Key("batch-refused", "call-1")
    arguments = {"text": "refused", "code": code}
    errors = []
    with running(server, proxy):
        for _ in range(2):
            async with connect(client_url(proxy), mode) as connection:
                await connection.client.list_tools()
                with pytest.raises(MCPError) as refused:
                    await connection.client.call_tool("refuse_send", arguments, meta=key.meta())
                errors.append((refused.value, connection.wire.tool_calls("refuse_send")))
        count = server.count("refuse_send")

    assert count == executions
    for error, _ in errors:
        assert error.code == code, repr(error)
    [first], [second] = (calls for _, calls in errors)
    assert first.headers["idem-outcome"] == "forwarded"
    expected = "forwarded" if executions == 2 else "replayed"
    assert second.headers["idem-outcome"] == expected
    assert second.response is not None
    assert second.response["id"] == second.request["id"]
    assert second.response["error"]["code"] == code


async def test_a_call_refused_before_any_tool_ran_leaves_its_key_free_for_the_corrected_one(
    stateless: tuple[McpServerProcess, ServedProxy],
) -> None:
    """An ``Mcp-Name`` header that names another tool than the body is refused by the proxy
    itself, never forwarded; a call without the stateless revision's ``_meta`` envelope is
    refused by the SDK's server (-32602) before any tool runs. Neither takes the key: the
    agent's corrected call under it is sent, and runs once."""
    server, proxy = stateless
    arguments = {"text": "corrected"}
    call = stateless_call("send_message", arguments, "r1")
    mismatched = {**stateless_headers("read_count"), **KEY_HEADERS}
    bare = {**call, "id": "r2", "params": {"name": "send_message", "arguments": arguments}}
    right = {**stateless_headers("send_message"), **KEY_HEADERS}

    header_mismatch = await post(proxy, call, mismatched)
    refused_executions = server.executions()
    no_envelope = await post(proxy, bare, right)
    corrected = await post(proxy, {**call, "id": "r3"}, right)
    repeated = await post(proxy, {**call, "id": "r4"}, right)

    status, headers, answer = header_mismatch
    assert (status, answer["id"]) == (400, "r1")
    assert headers["Idem-Outcome"] != "forwarded"
    assert answer["error"]["data"]["status"] == 400
    assert refused_executions == {}
    status, headers, answer = no_envelope
    assert (status, headers["Idem-Outcome"], answer["id"]) == (400, "forwarded", "r2")
    assert answer["error"]["code"] == -32602
    status, headers, answer = corrected
    assert (status, headers["Idem-Outcome"], answer["id"]) == (200, "forwarded", "r3")
    status, headers, again = repeated
    assert (status, headers["Idem-Outcome"], again["id"]) == (200, "replayed", "r4")
    assert again["result"] == answer["result"]
    assert server.executions() == {"send_message": 1}


BATCH = [
    stateless_call("read_count", {}, 1),
    stateless_call("send_message", {"text": "batched"}, 2),
]
PLAIN = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_a_json_rpc_batch_holding_a_tool_call_is_refused_and_nothing_runs(
    stateless: tuple[McpServerProcess, ServedProxy],
) -> None:
    server, proxy = stateless
    status, headers, answer = await post(proxy, BATCH, PLAIN)

    assert status == 400, answer
    assert headers["Idem-Outcome"] == "invalid-request"
    assert server.executions() == {}


async def test_a_json_rpc_batch_s_refusal_is_a_json_rpc_error(
    stateless: tuple[McpServerProcess, ServedProxy],
) -> None:
    _, proxy = stateless
    _, headers, answer = await post(proxy, BATCH, PLAIN)

    assert headers["Content-Type"].startswith("application/json"), answer
    assert answer["error"]["data"]["status"] == 400


async def test_a_key_given_as_the_call_s_idempotency_key_parameter_acts_once(
    stateless: tuple[McpServerProcess, ServedProxy],
) -> None:
    server, proxy = stateless
    headers = stateless_headers("send_message")

    def keyed(request_id: str) -> dict[str, Any]:
        call = stateless_call("send_message", {"text": "by parameter"}, request_id)
        call["params"]["idempotencyKey"] = "order-4711"
        return call

    first = await post(proxy, keyed("k1"), headers)
    again = await post(proxy, keyed("k2"), headers)

    assert server.executions() == {"send_message": 1}
    assert (first[0], first[1]["Idem-Outcome"], first[2]["id"]) == (200, "forwarded", "k1")
    assert (again[0], again[1]["Idem-Outcome"], again[2]["id"]) == (200, "replayed", "k2")
    assert again[1]["Idempotent-Replayed"] == "true"
    assert again[2]["result"] == first[2]["result"]


async def test_an_input_required_round_leaves_the_key_free_and_the_round_that_sends_is_kept(
    stateless: tuple[McpServerProcess, ServedProxy],
) -> None:
    """The SDK's client answers ``input_required`` by calling again with the ``requestState``:
    the same tool, arguments and key. Recorded, the first round would be replayed to it for
    ever; the round that sent is what a later repeat gets."""
    server, proxy = stateless
    key = Key("batch-confirm", "call-1")
    url = client_url(proxy)
    async with connect(url, "auto") as first:
        sent = await first.client.call_tool("confirm_send", {"text": "ok"}, meta=key.meta())
    async with connect(url, "auto") as again:
        await again.client.list_tools()
        repeat = await again.client.call_tool("confirm_send", {"text": "ok"}, meta=key.meta())

    assert server.executions() == {"confirm_asked": 1, "confirm_send": 1}
    assert repeat.content == sent.content
    assert "requestState" not in str(sent.content)
    asked, sending = first.wire.tool_calls("confirm_send")
    assert asked.response is not None
    assert asked.response["result"]["resultType"] == "input_required"
    assert [e.headers["idem-outcome"] for e in (asked, sending)] == ["forwarded", "forwarded"]
    [replay] = again.wire.tool_calls("confirm_send")
    assert replay.headers["idem-outcome"] == "replayed"
    assert replay.response is not None
    assert replay.response["id"] == replay.request["id"]
