"""The mcp: section of a policy."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from idemproxy.errors import ConfigError
from idemproxy.policies.kinds import ToolCallEffects
from idemproxy.policies.loader import load_policy, parse_policy
from idemproxy.policies.mcp import NOTHING_HAPPENED_ERRORS, McpRules, McpTool, ToolEffect

POLICY = """\
name: tools
mcp:
  tools:
    - {name: read_count, effect: safe}
    - {name: send_message, volatile_arguments: [/sent_at], tool_call_effects: one}
default: {name: mcp}
"""


def test_a_policy_names_the_tools_of_its_server() -> None:
    rules = parse_policy(POLICY, "tools.yaml").mcp
    assert rules is not None
    assert rules.tool("read_count") == McpTool(name="read_count", effect=ToolEffect.SAFE)
    sender = rules.tool("send_message")
    assert sender is not None
    assert sender.volatile_arguments == ("/sent_at",)
    assert sender.tool_call_effects is ToolCallEffects.ONE
    assert rules.tool("other") is None
    assert rules.not_applied_errors == NOTHING_HAPPENED_ERRORS
    assert not rules.trust_read_only_hint


def test_the_shipped_pack_names_no_tool_and_trusts_no_hint() -> None:
    rules = load_policy("mcp").mcp
    assert rules == McpRules()


def test_a_safe_tool_has_no_volatile_arguments() -> None:
    with pytest.raises(ValidationError, match="is safe: it is never recorded"):
        McpTool(name="read", effect=ToolEffect.SAFE, volatile_arguments=("/x",))


def test_a_tool_is_named_once() -> None:
    with pytest.raises(ValidationError, match="named twice"):
        McpRules(tools=(McpTool(name="a"), McpTool(name="a")))


@pytest.mark.parametrize("name", ["", "has space", "x" * 129])
def test_a_tool_name_is_one_the_spec_allows(name: str) -> None:
    with pytest.raises(ValidationError):
        McpTool(name=name)


def test_a_volatile_argument_is_a_json_pointer() -> None:
    text = POLICY.replace("[/sent_at]", "[sent_at]")
    with pytest.raises(ConfigError, match="is not a JSON pointer"):
        parse_policy(text, "tools.yaml")


def test_an_mcp_server_has_no_adapter() -> None:
    with pytest.raises(ConfigError, match="an MCP server has no stripe dedupe key"):
        parse_policy("adapter: stripe\n" + POLICY, "tools.yaml")


def test_the_pack_lets_a_duplicate_wait_for_a_long_tool() -> None:
    assert load_policy("mcp").default.coalesce_wait_ms == 120_000
