"""Undoing an MCP tool call with the CLI: the policy declares delete_message as send_message's
compensation, and ``idemproxy recover --strategy compensate`` calls it through ``idemproxy
serve`` on the official SDK's server, in an MCP session of its own, exactly once however
often the operator runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.test_recovery import cli
from tests.support.mcp_agent import Key, call, connect
from tests.support.mcp_upstream import McpServerProcess, client_url, mcp_proxy
from tests.support.processes import running

pytestmark = pytest.mark.e2e

AGENT, BATCH = "mcp-bot", "batch-c"
POLICY = """\
name: tools
mcp:
  tools:
    - {name: read_count, effect: safe}
    - name: send_message
      compensation:
        tool: delete_message
        arguments: {id: "{response./result/structuredContent/id}"}
routes:
  - {name: stream, match: {methods: [GET, DELETE, HEAD, OPTIONS]}, effect: safe}
default: {name: mcp, effect: external}
"""


@pytest.fixture(params=["session", "stateless"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[McpServerProcess]:
    server = McpServerProcess(tmp_path, request.param)
    with running(server):
        yield server


async def test_a_sent_message_is_deleted_once_however_often_recover_runs(
    tmp_path: Path, server: McpServerProcess
) -> None:
    policy = tmp_path / "tools.yaml"
    policy.write_text(POLICY)
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT, str(policy))
    mode = "legacy" if server.mode == "session" else "auto"
    with running(proxy):
        url = client_url(proxy)
        sent = await call(url, mode, Key(BATCH, "announce"), "send_message", {"text": "hi"})
        assert sent.structured_content == {"id": 1, "text": "hi"}

        admin = ("--admin-url", proxy.admin_url)
        code, plan = cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin)
        assert code == 0, plan
        assert "tools/call delete_message" in plan
        assert server.deleted() == []
        runs = [
            cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin, "--yes", "--json")
            for _ in range(2)
        ]

        # The agent, re-run, repeats its call: the message is gone, and it is told so.
        async with connect(url, mode) as connection:
            key = Key(BATCH, "announce")
            with pytest.raises(MCPError, match="compensat") as refused:
                await connection.client.call_tool("send_message", {"text": "hi"}, meta=key.meta())
    assert [code for code, _ in runs] == [0, 0], runs
    first, second = (orjson.loads(out) for _, out in runs)
    assert [(u["tool_call"], u["state"]) for u in first["undo"]] == [("announce", "undone")]
    assert [u["state"] for u in second["undo"]] == ["undone"]
    assert server.deleted() == [1]
    assert server.executions() == {"send_message": 1, "delete_message": 1}
    assert isinstance(refused.value.data, dict)
    assert refused.value.data["code"] == "effect-compensated"
