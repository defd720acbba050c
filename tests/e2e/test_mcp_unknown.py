"""An MCP tool call whose answer never reached the proxy: its outcome is unknown, it waits for
review, and a repeat is refused rather than sent again.

The official SDK on both sides, as in tests/e2e/test_mcp.py; the stream is cut mid-call either on
the link between the proxy and the MCP server (the server lives on and keeps its count) or by
killing the MCP server (restarted empty before the repeat).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.test_mcp import SERVER_MODES, agent_process, until
from tests.support.forwarder import Forwarder
from tests.support.mcp_agent import Key, connect
from tests.support.mcp_upstream import McpServerProcess, client_url, mcp_proxy
from tests.support.processes import free_port, http_get, running

pytestmark = pytest.mark.e2e

AGENT = "mcp-agent"
SLOW_MS = 2500


def review_items(admin_url: str) -> list[dict[str, object]]:
    status, body = http_get(f"{admin_url}/v1/review")
    assert status == 200, body
    items: list[dict[str, object]] = orjson.loads(body)["items"]
    return items


@pytest.mark.parametrize("cut", ["link", "server"])
@pytest.mark.parametrize("mode", sorted(SERVER_MODES))
async def test_a_call_cut_off_mid_stream_is_unknown_and_its_repeat_refused_not_sent(
    tmp_path: Path, mode: str, cut: str
) -> None:
    server = McpServerProcess(tmp_path, SERVER_MODES[mode])
    key = Key("batch-cut", "call-1")
    arguments = {"text": "cut off", "ms": SLOW_MS}
    with running(server), Forwarder(free_port(), server.port) as link:
        proxy = mcp_proxy(
            tmp_path, f"http://127.0.0.1:{link.listen_port}", f"sqlite:///{tmp_path}/s.db", AGENT
        )
        with running(proxy):
            url = client_url(proxy)
            first = agent_process(tmp_path, url, mode, key, "slow_send", **arguments)
            first.start()
            try:
                await until(lambda: server.count("slow_send") == 1)
                if cut == "link":
                    link.cut()
                else:
                    server.kill()
                await until(lambda: bool(review_items(proxy.admin_url)))
            finally:
                first.kill()
            if cut == "link":
                link.mend()
                await asyncio.sleep(SLOW_MS / 1000)  # the server's execution has ended
            else:
                server.start()
            async with connect(url, mode) as connection:
                with pytest.raises(MCPError) as refused:
                    await connection.client.call_tool("slow_send", arguments, meta=key.meta())
            [item] = review_items(proxy.admin_url)
            executed = server.count("slow_send")

    assert "outcome-unknown" in orjson.dumps(refused.value.data).decode()
    assert executed == (1 if cut == "link" else 0)
    [repeat] = connection.wire.tool_calls("slow_send")
    assert repeat.status == 409
    assert repeat.headers["idem-outcome"] == "outcome-unknown"
    assert repeat.headers["content-type"].startswith("application/json")
    assert repeat.response is not None
    assert repeat.response["id"] == repeat.request["id"]
    problem = repeat.response["error"]["data"]
    assert problem["type"].endswith("outcome-unknown")
    assert problem["status"] == 409
    assert problem["effect_key"] == repeat.headers["idem-key"]
    assert item["state"] == "unknown"
    assert item["effect_key"] == repeat.headers["idem-key"]
    assert connection.wire.mismatched_ids() == []
