"""Policies described for people: route rows for ``idemproxy policies`` and the docs, and the
JSON schema of a policy file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.loader import load_policy, shipped_packs
from idemproxy.policies.mcp import McpRules
from idemproxy.policies.policy import Policy
from idemproxy.policies.route import Route

SCHEMA_ID = "https://idemproxy.dev/schemas/policy.schema.json"


@dataclass(frozen=True, slots=True)
class RouteRow:
    """One route as a table shows it."""

    name: str
    methods: str
    path: str
    effect: str
    native_key: bool
    volatile_fields: str
    on_missing_key: str
    undo: str  # the compensation request, if the route declares one
    secret_path_params: str = ""

    @classmethod
    def of(cls, route: Route, *, default: bool = False) -> RouteRow:
        return cls(
            name=route.name,
            methods="(default)" if default else ", ".join(route.match.methods),
            path="(anything else)" if default else route.match.path,
            effect=str(route.effect),
            native_key=route.native_key,
            volatile_fields=", ".join(route.volatile_fields),
            # A safe route never needs a key, so the rule has nothing to say there.
            on_missing_key="" if route.effect is EffectClass.SAFE else str(route.on_missing_key),
            undo=route.compensation.describe() if route.compensation else "",
            secret_path_params=", ".join(route.secret_path_params),
        )


def effect_counts(policy: Policy) -> str:
    """``17 external, 5 safe``: how many routes (default included) have each effect class."""
    routes = (*policy.routes, policy.default)
    counts = {effect: sum(route.effect is effect for route in routes) for effect in EffectClass}
    return ", ".join(f"{count} {effect}" for effect, count in counts.items() if count)


def route_rows(policy: Policy) -> list[RouteRow]:
    """The routes in the order they are tried, the default last."""
    rows = [RouteRow.of(route) for route in policy.routes]
    rows.append(RouteRow.of(policy.default, default=True))
    return rows


def markdown_route_tables() -> str:
    """Every shipped pack's routes as Markdown, the reference section of docs/policies.md."""
    sections = []
    for name in shipped_packs():
        policy = load_policy(name)
        window = f", native key window {policy.window_s} s" if policy.window_s else ""
        lines = [
            f"### `{name}` (adapter `{policy.adapter}`{window})",
            "",
            " ".join(policy.description.split()),
            "",
            "| route | methods | path | effect | native key | volatile fields | compensation |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in route_rows(policy):
            volatile = f"`{row.volatile_fields}`" if row.volatile_fields else ""
            native = "yes" if row.native_key else ""
            path = row.path if row.path.startswith("(") else f"`{row.path}`"
            if row.secret_path_params:
                path += f" (secret: `{row.secret_path_params}`)"
            undo = f"`{row.undo}`" if row.undo else ""
            lines.append(
                f"| `{row.name}` | {row.methods} | {path} | {row.effect} | {native} | {volatile}"
                f" | {undo} |"
            )
        if policy.mcp is not None:
            lines += ["", *mcp_lines(policy.mcp)]
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def mcp_lines(rules: McpRules) -> list[str]:
    """What an MCP policy's ``mcp:`` section says, as Markdown."""
    lines = [
        "POSTs carry JSON-RPC messages: a `tools/call` is an external effect unless the tool is"
        " named safe below; every other message passes unrecorded"
        + (
            " (and so does a tool whose tools/list annotations say `readOnlyHint`)."
            if rules.trust_read_only_hint
            else "."
        )
        + " JSON-RPC errors "
        + ", ".join(str(code) for code in rules.not_applied_errors)
        + " mean the tool never ran.",
    ]
    if rules.tools:
        lines += ["", "| tool | effect | volatile arguments | compensation |", "|---|---|---|---|"]
        for tool in rules.tools:
            volatile = f"`{', '.join(tool.volatile_arguments)}`" if tool.volatile_arguments else ""
            undo = f"`{tool.compensation.describe()}`" if tool.compensation else ""
            lines.append(f"| `{tool.name}` | {tool.effect} | {volatile} | {undo} |")
    return lines


def policy_schema() -> dict[str, Any]:
    """The JSON schema of a policy file, for editors and CI checks of user policies."""
    schema = Policy.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}
