"""Which MCP messages are effects, and what identifies one tool call (docs/mcp.md).

A ``tools/call`` is keyed like any effect (effectkeys.py): by agent, batch and tool call, from
the ``Idem-*`` headers or, per call, from the request's ``_meta`` (``dev.idemproxy/batch``,
``dev.idemproxy/toolCall``, ``dev.idemproxy/step``, ``dev.idemproxy/agent``,
``dev.idemproxy/action``) or its ``idempotencyKey`` parameter; and it is told apart from other
calls by the tool's name and its canonical arguments. Never by the JSON-RPC id: a client counts
ids per session, and a client that restarts, or re-issues a call whose stream closed, sends the
same call under a new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from idemproxy.agent import (
    ACTION_HEADER,
    AGENT_HEADER,
    BATCH_HEADER,
    MCP_META,
    STEP_HEADER,
    TOOL_CALL_HEADER,
)
from idemproxy.effectkeys import KeyHeaders
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.jsonrpc import Batch, Message, answer_to, result_of
from idemproxy.policies.kinds import EffectClass, ToolCallEffects
from idemproxy.policies.mcp import McpRules, ToolEffect
from idemproxy.policies.route import Route

TOOLS_CALL = "tools/call"
TOOLS_LIST = "tools/list"
META_PREFIX = "dev.idemproxy/"
# What a 2026-07-28 client says of its message in headers, for servers that route by them.
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
# What a message that is no tool call is counted as: one bounded route label for them all.
RPC_ROUTE = "rpc"
# The _meta entries a call may carry its own key in (agent.mcp_meta() writes them), by the
# KeyHeaders field each one sets.
_META_FIELDS = {
    MCP_META[AGENT_HEADER]: "agent",
    MCP_META[BATCH_HEADER]: "batch",
    MCP_META[TOOL_CALL_HEADER]: "tool_call",
    MCP_META[STEP_HEADER]: "step",
    MCP_META[ACTION_HEADER]: "action",
}
MAX_HINTED_TOOLS = 10_000


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A ``tools/call`` that is an effect, as the effect flow takes it."""

    tool: str
    route: Route
    headers: KeyHeaders  # the request's, the call's own ``_meta`` and ``idempotencyKey`` over them
    # What makes two calls one: the tool's name and its arguments, as canonical JSON is made
    # of them (fingerprint.py), with ``volatile_fields`` left out.
    identity: bytes
    volatile_fields: tuple[str, ...]


class ReadOnlyHints:
    """The tools an MCP server's ``tools/list`` answers annotated ``readOnlyHint: true``, for a
    policy that trusts them. Learned by this process as the answers pass: until it has seen
    one, every call is an effect, which costs a record and never a duplicate."""

    def __init__(self) -> None:
        self._names: set[str] = set()

    def __contains__(self, tool: object) -> bool:
        return tool in self._names

    def learn(self, answer: Mapping[str, Any]) -> None:
        tools = result_of(dict(answer)).get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            annotations = tool.get("annotations")
            read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
            if read_only and len(self._names) < MAX_HINTED_TOOLS:
                self._names.add(tool["name"])
            elif not read_only:
                self._names.discard(tool["name"])  # a tool the server no longer calls read-only


class McpClassifier:
    """One MCP upstream's rules, with the routes its tool calls are recorded under."""

    def __init__(self, rules: McpRules) -> None:
        self.rules = rules
        self.hints = ReadOnlyHints()
        self._routes: dict[tuple[str, str | None], Route] = {}
        self._passed_routes: dict[tuple[str, str], Route] = {}

    def tool_call(
        self, message: Message | Batch, route: Route, headers: KeyHeaders
    ) -> ToolCall | None:
        """The effect ``message`` is, or None for one forwarded unrecorded: no tool call, or a
        call of a tool the policy (or a trusted hint) says is safe."""
        if isinstance(message, Batch):
            if any(item.method == TOOLS_CALL for item in message.messages):
                raise RequestRefused(
                    ProblemCode.INVALID_REQUEST,
                    "a JSON-RPC batch holding tools/call cannot be recorded call by call; send"
                    " each tools/call as a POST of its own (MCP has not allowed batches since"
                    " 2025-06-18)",
                )
            return None
        if message.method != TOOLS_CALL:
            return None
        if not message.is_request:
            # JSON-RPC has a server act on a notification without answering it: a tool call
            # without an id could run with no answer to record.
            raise RequestRefused(
                ProblemCode.INVALID_REQUEST,
                "a tools/call must carry a JSON-RPC id: sent as a notification it could run a"
                " tool with no answer to record; give it an id",
            )
        name = message.params.get("name")
        if not isinstance(name, str) or not name:
            return None  # the server refuses a call without a tool name: nothing acts
        rule = self.rules.tool(name)
        if rule is not None and rule.effect is ToolEffect.SAFE:
            return None
        if rule is None and self.rules.trust_read_only_hint and name in self.hints:
            return None
        arguments = message.params.get("arguments")
        identity = orjson.dumps({"name": name, "arguments": arguments})
        tool_route = self._tool_route(route, rule.name if rule else None)
        return ToolCall(
            tool=name,
            route=tool_route,
            headers=_call_headers(headers, message.params, name),
            identity=identity,
            volatile_fields=tool_route.volatile_fields,
        )

    def inspector(self, message: Message | Batch | None) -> Callable[[bytes, str], None] | None:
        """What reads the answer to ``message`` as it passes: a ``tools/list``'s annotations,
        where the policy trusts them."""
        if not self.rules.trust_read_only_hint or not isinstance(message, Message):
            return None
        if message.method != TOOLS_LIST or not message.is_request:
            return None
        request_id = message.id

        def learn(body: bytes, content_type: str) -> None:
            answer = answer_to(body, content_type, request_id)
            if answer is not None:
                self.hints.learn(answer)

        return learn

    def passed_route(self, route: Route, message: Message | Batch | None) -> Route:
        """The route a message that acts on nothing is forwarded and counted under: a call of
        a tool the policy names safe under the tool's name, anything else under "rpc"."""
        name = RPC_ROUTE
        if isinstance(message, Message) and message.method == TOOLS_CALL:
            tool = message.params.get("name")
            if isinstance(tool, str) and self.rules.tool(tool) is not None:
                name = tool  # bounded: the policy names it
        key = (route.name, name)
        if key not in self._passed_routes:
            update = {"name": name, "effect": EffectClass.SAFE, "retry": None}
            self._passed_routes[key] = route.model_copy(update=update)
        return self._passed_routes[key]

    def _tool_route(self, route: Route, named: str | None) -> Route:
        """``route`` as the policy's rule for the tool ``named`` shapes it: under the tool's
        name, so its metrics say which tool; a tool the policy does not name keeps the route's
        name, since a label from the server's own tool names would have no bound."""
        key = (route.name, named)
        if key not in self._routes:
            rule = self.rules.tool(named) if named is not None else None
            update: dict[str, Any] = {}
            if rule is not None:
                volatile = tuple("/arguments" + pointer for pointer in rule.volatile_arguments)
                update = {
                    "name": rule.name,
                    "tool_call_effects": rule.tool_call_effects,
                    "volatile_fields": volatile,
                }
            else:
                # The route's volatile fields point into a JSON-RPC body, not into a call's
                # arguments; and "one effect per tool call" would make every tool one effect.
                update = {"tool_call_effects": ToolCallEffects.MANY, "volatile_fields": ()}
            self._routes[key] = route.model_copy(update=update)
        return self._routes[key]


def check_routing_headers(
    message: Message | Batch | None, method: str | None, name: str | None
) -> None:
    """Refuse a request whose ``Mcp-Method`` or ``Mcp-Name`` header (2026-07-28) says another
    message than its body: the proxy judges the body, and a server or gateway that routes by
    the headers could run a tool the proxy passed as a ping."""
    said = message.method if isinstance(message, Message) else None
    if method is not None and method != said:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"the Mcp-Method header says {method!r} but the body's method is {said!r}; send"
            " the header the body's message calls for, or none",
        )
    if name is None or said != TOOLS_CALL or not isinstance(message, Message):
        return
    tool = message.params.get("name")
    if name != tool:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"the Mcp-Name header says {name!r} but the body calls tool {tool!r}; send the"
            " header the body's call calls for, or none",
        )


def missing_key(tool: str) -> RequestRefused:
    """The refusal of a tool call that carries no key, saying where an MCP client puts one."""
    return RequestRefused(
        ProblemCode.MISSING_IDEMPOTENCY_KEY,
        f"tool {tool!r} acts on the world: send the agent's batch and tool call with it, as"
        f" the Idem-Batch and Idem-Tool-Call headers or in the call's _meta ({META_PREFIX}batch"
        f" and {META_PREFIX}toolCall), so that a repeat is recognised and not run twice; a tool"
        " that only reads can be named safe in the policy's mcp.tools",
    )


def _call_headers(headers: KeyHeaders, params: Mapping[str, Any], tool: str) -> KeyHeaders:
    """The request's key headers with what the call carries itself laid over them: a client
    may set ``Idem-Batch`` on its connection and name each call in ``_meta``."""
    meta = params.get("_meta")
    changes: dict[str, str] = {}
    if isinstance(meta, dict):
        for name, field in _META_FIELDS.items():
            value = meta.get(name)
            if value is not None:
                changes[field] = _text(f"_meta {name}", value)
    key = params.get("idempotencyKey")
    if key is not None:
        changes["idempotency_key"] = _text("idempotencyKey", key)
    if headers.action is None and "action" not in changes:
        changes["action"] = tool
    return dataclasses.replace(headers, **changes)


def _text(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise RequestRefused(
            ProblemCode.INVALID_IDEMPOTENCY_KEY,
            f"{where} must be a string, not {type(value).__name__}; send a stable id such as"
            " the agent's tool-call id",
        )
    return value
