"""An MCP tool held for approval, with the official SDK on both sides through `idemproxy serve`:
the SDK's call fails with the JSON-RPC error that carries ``approval-required``; once an operator
approves it, a new session's repeat runs the tool once, and a denied one never runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp_agent import Key, call, connect
from tests.support.mcp_upstream import MCP_POLICY, McpServerProcess, client_url, mcp_proxy
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT = "mcp-agent"
SERVER_MODES = {"auto": "stateless", "legacy": "session"}
HELD = MCP_POLICY.replace(
    "default: {name: mcp, effect: external}",
    "default: {name: mcp, effect: external, approval: {when: [{tool: [send_message]}]}}",
)


@pytest.fixture(params=sorted(SERVER_MODES))
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture
def proxy(tmp_path: Path, mode: str) -> Iterator[tuple[ServedProxy, McpServerProcess]]:
    server = McpServerProcess(tmp_path, SERVER_MODES[mode])
    policy = tmp_path / "held.yaml"
    policy.write_text(HELD)
    served = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT, str(policy))
    with running(server, served):
        yield served, server


async def refused(proxy: ServedProxy, mode: str, key: Key, text: str) -> dict[str, Any]:
    """The refusal the SDK hands to the call, in a session of its own."""
    async with connect(client_url(proxy), mode) as connection:
        with pytest.raises(MCPError) as error:
            await connection.client.call_tool("send_message", {"text": text}, meta=key.meta())
    data: dict[str, Any] = orjson.loads(orjson.dumps(error.value.data))
    return data


def decide(proxy: ServedProxy, approval_id: str, verdict: str) -> None:
    url = f"{proxy.admin_url}/v1/approvals/{AGENT}/{approval_id}/decision"
    answer = httpx.post(url, json={"as": verdict, "note": "checked", "actor": "carol"})
    assert answer.status_code == 200, answer.text


async def test_a_held_tool_runs_once_after_its_approval_and_a_denied_one_never(
    mode: str, proxy: tuple[ServedProxy, McpServerProcess]
) -> None:
    served, server = proxy
    held = await refused(served, mode, Key("b1", "c1"), "hello")
    assert held["code"] == "approval-required"
    assert held["approval"]["reason"] == "tool in ['send_message']"
    assert server.count("send_message") == 0
    # A tool the rule does not name is not held.
    assert (
        await call(client_url(served), mode, Key("b1", "c0"), "read_count", {})
    ).is_error is False

    decide(served, held["approval"]["id"], "approved")
    done = await call(client_url(served), mode, Key("b1", "c1"), "send_message", {"text": "hello"})
    again = await call(client_url(served), mode, Key("b1", "c1"), "send_message", {"text": "hello"})
    assert done.structured_content == again.structured_content == {"id": 1, "text": "hello"}
    assert server.count("send_message") == 1

    other = await refused(served, mode, Key("b1", "c2"), "never")
    decide(served, other["approval"]["id"], "denied")
    denied = await refused(served, mode, Key("b1", "c2"), "never")
    assert (denied["code"], denied["note"]) == ("approval-denied", "checked")
    assert server.count("send_message") == 1
