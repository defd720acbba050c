"""The ``mcp:`` section of a policy: an upstream that is an MCP server over streamable HTTP, and
which of its tools act on the world.

Routes match a method and a path, and every MCP message is a ``POST`` to one path, so an MCP
upstream is classified by the JSON-RPC message instead: ``tools/call`` is an effect unless the
policy names the tool safe, and everything else (``initialize``, ``server/discover``,
``tools/list``, ``resources/*``, ``prompts/*``, ``ping``, notifications, the client's answers
to the server) is read-only protocol traffic. See docs/mcp.md.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from idemproxy.policies import placeholders
from idemproxy.policies.document import Frozen
from idemproxy.policies.kinds import TOOL_NAME, ToolCallEffects
from idemproxy.policies.placeholders import Source
from idemproxy.policies.route import check_pointer

# The errors a server sends before a tool runs: unparsable, not a request, no such method, bad
# arguments. Any other error may come from inside a tool that already acted.
NOTHING_HAPPENED_ERRORS = (-32700, -32600, -32601, -32602)


class ToolEffect(StrEnum):
    """safe: passed through, never recorded; external: done exactly once."""

    SAFE = "safe"
    EXTERNAL = "external"


class ToolCompensation(Frozen):
    """``compensation:`` of a tool: the call of another tool that undoes one of its effects,
    its arguments filled from the recorded answer (``{response./result/structuredContent/id}``).
    ``idemproxy recover AGENT BATCH --strategy compensate`` sends it through the proxy, as an
    effect of its own (docs/recovery.md)."""

    tool: Annotated[str, Field(pattern=TOOL_NAME)]
    arguments: Any = None

    @model_validator(mode="after")
    def _fillable(self) -> ToolCompensation:
        # A record keeps the tool's answer and no request, and an MCP path has no parameters.
        for text in placeholders.templates_in(self.arguments or {}):
            placeholders.check(text, frozenset(), frozenset({Source.RESPONSE}), "compensation")
        return self

    def describe(self) -> str:
        """``tools/call delete_message``: the call as a plan shows it."""
        return f"tools/call {self.tool}"


class McpTool(Frozen):
    """One tool of the server, by name."""

    name: Annotated[str, Field(pattern=TOOL_NAME)]
    effect: ToolEffect = ToolEffect.EXTERNAL
    # JSON pointers into the tool's arguments a repeat may word anew (a timestamp, a nonce):
    # left out of what makes two calls one.
    volatile_arguments: tuple[str, ...] = ()
    tool_call_effects: ToolCallEffects = ToolCallEffects.MANY
    compensation: ToolCompensation | None = None

    @field_validator("volatile_arguments")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pointer in value:
            check_pointer(pointer)
        return value

    @model_validator(mode="after")
    def _effects_only_for_effects(self) -> McpTool:
        if self.effect is ToolEffect.SAFE and (
            self.volatile_arguments
            or self.tool_call_effects is ToolCallEffects.ONE
            or self.compensation is not None
        ):
            raise ValueError(
                f"tool {self.name!r} is safe: it is never recorded, so volatile_arguments,"
                " tool_call_effects and compensation mean nothing for it; remove them or make"
                " it external"
            )
        return self


class McpRules(Frozen):
    """How the messages of an MCP server are told apart."""

    tools: tuple[McpTool, ...] = ()
    # Tool annotations come from the server and are hints (the MCP spec says so): a policy
    # may choose to trust a tools/list answer's readOnlyHint, and then calls of such a tool
    # pass unrecorded. Off by default: a wrong hint acts twice.
    trust_read_only_hint: bool = False
    # JSON-RPC error codes that mean the tool never ran, which frees the key for a retry.
    not_applied_errors: tuple[int, ...] = NOTHING_HAPPENED_ERRORS

    @model_validator(mode="after")
    def _unique_tools(self) -> McpRules:
        seen: set[str] = set()
        for tool in self.tools:
            if tool.name in seen:
                raise ValueError(f"tool {tool.name!r} is named twice; name each tool once")
            seen.add(tool.name)
        return self

    def tool(self, name: str) -> McpTool | None:
        """The policy's rule for the tool ``name``; None for a tool the policy does not name."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None
