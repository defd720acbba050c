"""Which MCP tools a policy lets pass unrecorded, behind `idemproxy serve`, with the official
SDK on both sides: the shipped ``mcp`` pack, which names no tool and so records every call, and a
policy that trusts the server's ``readOnlyHint`` annotations once it has seen them listed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp_agent import Key, connect
from tests.support.mcp_upstream import McpServerProcess, client_url, mcp_proxy
from tests.support.processes import running

pytestmark = pytest.mark.e2e

AGENT = "mcp-agent"
TRUSTING = """\
name: tools
mcp:
  trust_read_only_hint: true
routes:
  - {name: stream, match: {methods: [GET, DELETE, HEAD, OPTIONS]}, effect: safe}
default: {name: mcp, effect: external}
"""


def refused_for_want_of_a_key(error: MCPError) -> bool:
    return "missing-idempotency-key" in orjson.dumps(error.data).decode()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_shipped_pack_records_every_tool_call_the_read_only_one_too(
    tmp_path: Path, mode: str
) -> None:
    server = McpServerProcess(tmp_path, "stateless" if mode == "auto" else "session")
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT, "mcp")
    key = Key("batch-pack", "call-1")
    with running(server, proxy):
        async with connect(client_url(proxy), mode) as connection:
            listed = await connection.client.list_tools()
            with pytest.raises(MCPError) as unkeyed:
                await connection.client.call_tool("read_count", {})
            first = await connection.client.call_tool("read_count", {}, meta=key.meta())
            await connection.client.call_tool(
                "send_message", {"text": "x"}, meta=Key("b", "c").meta()
            )
            again = await connection.client.call_tool("read_count", {}, meta=key.meta())
        executions = server.executions()

    assert len(listed.tools) > 1
    assert refused_for_want_of_a_key(unkeyed.value)
    # A keyed read is an effect under this pack: its repeat is the first answer, stale or not.
    assert first.structured_content == again.structured_content == {"result": 0}
    assert executions == {"read_count": 1, "send_message": 1}
    outcomes = [e.headers.get("idem-outcome") for e in connection.wire.tool_calls("read_count")]
    assert outcomes == ["missing-idempotency-key", "forwarded", "replayed"]


async def test_a_policy_trusting_read_only_hints_passes_a_hinted_tool_once_it_was_listed(
    tmp_path: Path,
) -> None:
    server = McpServerProcess(tmp_path, "stateless")
    policy = tmp_path / "trusting.yaml"
    policy.write_text(TRUSTING)
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT, str(policy))
    with running(server, proxy):
        async with connect(client_url(proxy), "auto") as connection:
            # Before this proxy has seen the server's tools listed, the hint is unknown to it.
            with pytest.raises(MCPError) as before_listing:
                await connection.client.call_tool("read_count", {})
            await connection.client.list_tools()
            reads = [(await connection.client.call_tool("read_count", {})) for _ in range(2)]
            with pytest.raises(MCPError) as unhinted:
                await connection.client.call_tool("send_message", {"text": "no key"})
        executions = server.executions()

    assert refused_for_want_of_a_key(before_listing.value)
    assert [r.structured_content for r in reads] == [{"result": 0}, {"result": 0}]
    assert executions == {"read_count": 2}
    assert refused_for_want_of_a_key(unhinted.value)


async def test_a_volatile_argument_stamped_anew_on_the_repeat_is_still_the_same_call(
    tmp_path: Path,
) -> None:
    """The default test policy leaves send_message's ``/sent_at`` out of what makes two calls
    one: a rerun stamping a new time is replayed. Other text under the same tool-call id is
    another call (``tool_call_effects: many``, the default), and is sent."""
    server = McpServerProcess(tmp_path, "stateless")
    proxy = mcp_proxy(tmp_path, server.url, f"sqlite:///{tmp_path}/s.db", AGENT)
    key = Key("batch-stamped", "call-1")
    calls = [("stamped", "10:00:00"), ("stamped", "10:00:07"), ("other", "10:00:09")]
    outcomes, results = [], []
    with running(server, proxy):
        for text, sent_at in calls:
            async with connect(client_url(proxy), "auto") as connection:
                arguments = {"text": text, "sent_at": sent_at}
                results.append(
                    await connection.client.call_tool("send_message", arguments, meta=key.meta())
                )
            [on_wire] = connection.wire.tool_calls("send_message")
            outcomes.append(on_wire.headers["idem-outcome"])
        executions = server.executions()

    assert [r.structured_content for r in results] == [
        {"id": 1, "text": "stamped"},
        {"id": 1, "text": "stamped"},
        {"id": 2, "text": "other"},
    ]
    assert outcomes == ["forwarded", "replayed", "forwarded"]
    assert executions == {"send_message": 2}
