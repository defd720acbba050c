"""An MCP server behind `idemproxy serve`, with the official Python SDK on both sides.

The server (tests/support/mcp_server.py) is an ``MCPServer`` in a process of its own that counts
each tool execution; the agent is ``mcp.Client`` over streamable HTTP, in the stateless revision
("auto") and in the session revision ("legacy"). What the SDK hands back is not enough to check
ids: it matches answers to requests by id and patches an error's id to its request's, so each
test also reads the exchanges as they were on the wire (tests/support/mcp_wire.py).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from tests.support.mcp_agent import KEYINGS, Key, call, connect
from tests.support.mcp_upstream import McpServerProcess, client_url, mcp_proxy
from tests.support.mcp_wire import Exchange
from tests.support.processes import REPO, Process, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

AGENT = "mcp-agent"
# The server's way of serving each client mode: the stateless revision answers in JSON, the
# session revision in SSE streams.
SERVER_MODES = {"auto": "stateless", "legacy": "session"}
TOOLS = {
    "send_message", "read_count", "slow_send", "fail_send", "refuse_send", "confirm_send",
    "delete_message",
}  # fmt: skip


@pytest.fixture(params=sorted(SERVER_MODES))
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture
def server(tmp_path: Path, mode: str) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path, SERVER_MODES[mode])
    with running(server):
        yield server


def proxy_for(tmp_path: Path, server: McpServerProcess, store: str = "") -> ServedProxy:
    return mcp_proxy(tmp_path, server.url, store or f"sqlite:///{tmp_path}/s.db", AGENT)


def agent_process(tmp_path: Path, url: str, mode: str, key: Key, tool: str, **args: Any) -> Process:
    argv = [sys.executable, "-m", "tests.support.mcp_agent", url, mode, key.keying, key.batch]
    argv += [key.call, tool, orjson.dumps(args).decode()]
    return Process(f"agent-{key.call}", argv, tmp_path, {"PYTHONPATH": str(REPO)})


async def until(condition: Any, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def progress(proxy: ServedProxy, batch: str) -> dict[str, Any]:
    """The batch as the admin API shows it: its tool calls by state."""
    status, body = http_get(f"{proxy.admin_url}/v1/agents/{AGENT}/batches/{batch}")
    assert status == 200, body
    document: dict[str, Any] = orjson.loads(body)
    return document


def replayed(exchange: Exchange) -> bool:
    return exchange.headers.get("idempotent-replayed") == "true"


async def test_a_client_without_keys_lists_tools_reads_fresh_and_is_refused_an_unkeyed_effect(
    tmp_path: Path, mode: str, server: McpServerProcess
) -> None:
    proxy = proxy_for(tmp_path, server)
    with running(proxy):
        async with connect(client_url(proxy), mode) as connection:
            client = connection.client
            listed = await client.list_tools()
            before = await client.call_tool("read_count", {})
            sent = await client.call_tool(
                "send_message", {"text": "hello"}, meta=Key("b1", "c1").meta()
            )
            after = await client.call_tool("read_count", {})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("send_message", {"text": "no key"})
        counted = requests_counted(proxy)

    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    annotations = tools["read_count"].annotations
    assert annotations is not None
    assert annotations.read_only_hint is True
    # Not a replay of the first read: the second read saw the message sent in between.
    assert (before.structured_content, after.structured_content) == ({"result": 0}, {"result": 1})
    assert sent.structured_content == {"id": 1, "text": "hello"}
    assert server.executions() == {"read_count": 2, "send_message": 1}
    wire = connection.wire
    reads = wire.tool_calls("read_count")
    assert [(e.status, replayed(e)) for e in reads] == [(200, False), (200, False)]
    assert "missing-idempotency-key" in orjson.dumps(refused.value.data).decode()
    unkeyed = wire.tool_calls("send_message")[-1]
    assert unkeyed.status == 400
    assert unkeyed.headers["content-type"].startswith("application/json")
    assert unkeyed.response is not None
    assert "error" in unkeyed.response
    assert wire.mismatched_ids() == []
    # A tool call of a tool the policy names is counted under its name, safe or not; any other
    # message that is no effect under "rpc".
    assert counted[("send_message", "forwarded")] == 1, counted
    assert counted[("send_message", "missing-idempotency-key")] == 1
    assert counted[("read_count", "forwarded")] == 2
    assert counted[("rpc", "forwarded")] >= 2  # the handshake and the listing
    assert "mcp" not in {route for route, _ in counted}


async def test_a_safe_tool_s_calls_are_counted_under_its_name(
    tmp_path: Path, mode: str, server: McpServerProcess
) -> None:
    proxy = proxy_for(tmp_path, server)
    with running(proxy):
        async with connect(client_url(proxy), mode) as connection:
            await connection.client.call_tool("read_count", {})
        counted = requests_counted(proxy)

    assert counted[("read_count", "forwarded")] == 1, counted


def requests_counted(proxy: ServedProxy) -> Counter[tuple[str, str]]:
    """``idemproxy_requests_total`` of the upstream ``tools``, by route and outcome."""
    status, body = http_get(f"{proxy.admin_url}/metrics")
    assert status == 200, body
    counted: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == "idemproxy_requests_total" and sample.labels["upstream"] == "tools":
                counted[(sample.labels["route"], sample.labels["outcome"])] += int(sample.value)
    return counted


@pytest.mark.parametrize("keying", KEYINGS)
async def test_an_agent_killed_mid_call_reruns_it_and_gets_the_first_result_under_its_own_id(
    tmp_path: Path, mode: str, keying: str, server: McpServerProcess, store_url: str
) -> None:
    key = Key("batch-crash", "call-1", keying)
    arguments = {"text": "from the crashed run", "ms": 800}
    proxy = proxy_for(tmp_path, server, store_url)
    with running(proxy):
        url = client_url(proxy)
        doomed = agent_process(tmp_path, url, mode, key, "slow_send", **arguments)
        doomed.start()
        try:
            await until(lambda: server.count("slow_send") == 1)
        finally:
            doomed.kill()  # SIGKILL while the call is still running upstream
        assert "structured" not in doomed.output()
        # The proxy reads the upstream's answer to the end, its agent gone or not.
        await until(lambda: bool(progress(proxy, key.batch)["completed"]))
        [done] = progress(proxy, key.batch)["completed"]
        assert done["tool_call"] == key.call
        async with connect(url, mode, key.headers()) as connection:
            # The rerun's agent lists the tools first: its call goes out under another id.
            await connection.client.list_tools()
            rerun = await connection.client.call_tool("slow_send", arguments, meta=key.meta())
            raw = await repeat_raw(connection.wire.tool_calls("slow_send")[0], "raw-repeat-7")

    first = {"id": 1, "text": "from the crashed run"}
    assert rerun.structured_content == first
    assert server.executions() == {"slow_send": 1}
    [on_wire] = connection.wire.tool_calls("slow_send")
    assert on_wire.status == 200
    assert replayed(on_wire), on_wire.headers
    assert on_wire.headers["idem-outcome"] == "replayed"
    assert on_wire.headers["content-type"].startswith("application/json")
    assert on_wire.response is not None
    assert on_wire.response["id"] == on_wire.request["id"]
    assert connection.wire.mismatched_ids() == []
    status, headers, answer = raw
    assert (status, headers.get("Idempotent-Replayed")) == (200, "true")
    assert headers["Idem-Outcome"] == "replayed"
    assert answer["id"] == "raw-repeat-7"
    assert answer["result"]["structuredContent"] == first


async def repeat_raw(exchange: Exchange, request_id: str) -> tuple[int, dict[str, str], Any]:
    """The recorded tools/call sent again byte for byte but for its JSON-RPC id."""
    message = {**exchange.request, "id": request_id}
    skip = {"host", "content-length"}
    headers = {k: v for k, v in exchange.request_headers.items() if k not in skip}
    async with aiohttp.ClientSession() as session:
        body = orjson.dumps(message)
        async with session.post(exchange.url, data=body, headers=headers) as response:
            return response.status, dict(response.headers), orjson.loads(await response.read())


async def test_ten_concurrent_identical_calls_in_one_session_execute_once(
    tmp_path: Path, mode: str, server: McpServerProcess
) -> None:
    key = Key("batch-burst", "call-1")
    arguments = {"text": "burst", "ms": 800}
    proxy = proxy_for(tmp_path, server)
    with running(proxy):
        async with connect(client_url(proxy), mode) as connection:
            client = connection.client
            results = await asyncio.gather(
                *(client.call_tool("slow_send", arguments, meta=key.meta()) for _ in range(10))
            )

    assert [r.structured_content for r in results] == [{"id": 1, "text": "burst"}] * 10
    assert server.executions() == {"slow_send": 1}
    calls = connection.wire.tool_calls("slow_send")
    assert len({e.request["id"] for e in calls}) == 10
    assert all(e.response is not None and e.response["id"] == e.request["id"] for e in calls)
    outcomes = Counter(e.headers.get("idem-outcome") for e in calls)
    assert outcomes["forwarded"] == 1
    assert outcomes["coalesced"] + outcomes["replayed"] == 9, outcomes
    assert connection.wire.mismatched_ids() == []


async def test_an_error_result_is_an_outcome_recorded_once_and_replayed(
    tmp_path: Path, mode: str, server: McpServerProcess
) -> None:
    key = Key("batch-fail", "call-1", "headers")
    proxy = proxy_for(tmp_path, server)
    with running(proxy):
        url = client_url(proxy)
        async with connect(url, mode, key.headers()) as first:
            failed = await first.client.call_tool("fail_send", {"text": "nope"})
        async with connect(url, mode, key.headers()) as second:
            await second.client.list_tools()
            again = await second.client.call_tool("fail_send", {"text": "nope"})

    assert failed.is_error is True
    assert again.is_error is True
    assert again.content == failed.content
    assert "refused 'nope'" in str(failed.content)
    assert server.executions() == {"fail_send": 1}
    [original] = first.wire.tool_calls("fail_send")
    [repeat] = second.wire.tool_calls("fail_send")
    assert repeat.request["id"] != original.request["id"]
    assert original.headers["idem-outcome"] == "forwarded"
    assert replayed(repeat)
    assert repeat.response is not None
    assert repeat.response["id"] == repeat.request["id"]


async def test_a_session_replay_comes_through_a_fresh_session_and_each_closes_with_delete(
    tmp_path: Path,
) -> None:
    server = McpServerProcess(tmp_path, "session")
    proxy = proxy_for(tmp_path, server)
    key = Key("batch-session", "call-1")
    with running(server, proxy):
        url = client_url(proxy)
        first = await call(url, "legacy", key, "send_message", {"text": "once"})
        async with connect(url, "legacy") as connection:
            await connection.client.list_tools()
            again = await connection.client.call_tool(
                "send_message", {"text": "once"}, meta=key.meta()
            )
        async with connect(url, "legacy") as other:
            await other.client.list_tools()
        executions = server.executions()

    assert first.structured_content == again.structured_content == {"id": 1, "text": "once"}
    assert executions == {"send_message": 1}
    wire = connection.wire
    [initialize] = [e for e in wire.exchanges if e.rpc_method == "initialize"]
    session = initialize.headers["mcp-session-id"]
    assert session != other.wire.exchanges[0].headers["mcp-session-id"]
    [repeat] = wire.tool_calls("send_message")
    assert repeat.request_headers["mcp-session-id"] == session
    assert replayed(repeat)
    assert repeat.response is not None
    assert repeat.response["id"] == repeat.request["id"]
    deletes = [e for e in wire.exchanges if e.method == "DELETE"]
    assert [(e.status, e.request_headers["mcp-session-id"]) for e in deletes] == [(200, session)]
    streams = [e for e in wire.exchanges if e.method == "GET"]
    assert streams
    assert all(e.status == 200 for e in streams)
