"""``idemproxy policies list|show|schema``: what the shipped packs and a policy file contain."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from idemproxy.policies.catalog import policy_schema, route_rows
from idemproxy.policies.loader import load_policy, shipped_packs
from idemproxy.policies.mcp import McpRules


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [header, *rows]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _list(args: argparse.Namespace) -> int:
    packs = [load_policy(name) for name in shipped_packs()]
    if args.json:
        entries = [
            {
                "name": pack.name,
                "adapter": str(pack.adapter),
                "native_window_s": pack.window_s,
                "routes": len(pack.routes) + 1,
                "description": " ".join(pack.description.split()),
            }
            for pack in packs
        ]
        print(json.dumps(entries, indent=2))
        return 0
    rows = [
        (pack.name, str(pack.adapter), str(len(pack.routes) + 1), _summary(pack.description))
        for pack in packs
    ]
    print(table(("PACK", "ADAPTER", "ROUTES", "DESCRIPTION"), rows))
    return 0


def _summary(description: str) -> str:
    return " ".join(description.split()).split(". ")[0].removesuffix(".")


def _show(args: argparse.Namespace) -> int:
    policy = load_policy(args.name)
    if args.json:
        print(json.dumps(policy.model_dump(mode="json"), indent=2))
        return 0
    window = f", native key window {policy.window_s} s" if policy.window_s else ""
    print(f"policy {policy.name} (adapter {policy.adapter}{window})")
    if policy.description:
        print(" ".join(policy.description.split()))
    print()
    header = ("ROUTE", "METHODS", "PATH", "EFFECT", "NATIVE KEY", "VOLATILE FIELDS", "NO KEY")
    rows = [
        (
            row.name,
            row.methods,
            row.path,
            row.effect,
            "yes" if row.native_key else "",
            row.volatile_fields,
            row.on_missing_key,
        )
        for row in route_rows(policy)
    ]
    print(table(header, rows))
    if policy.mcp is not None:
        print()
        print(_mcp_summary(policy.mcp))
        if policy.mcp.tools:
            print()
            tools = [
                (
                    tool.name,
                    str(tool.effect),
                    ", ".join(tool.volatile_arguments),
                    tool.compensation.describe() if tool.compensation else "",
                )
                for tool in policy.mcp.tools
            ]
            print(table(("TOOL", "EFFECT", "VOLATILE ARGUMENTS", "COMPENSATION"), tools))
    return 0


def _mcp_summary(rules: McpRules) -> str:
    hint = "trusted" if rules.trust_read_only_hint else "not trusted"
    codes = ", ".join(str(code) for code in rules.not_applied_errors)
    return (
        "MCP: a POST's tools/call is an external effect unless its tool is named safe; other"
        f" messages pass unrecorded. readOnlyHint: {hint}. Errors meaning no tool ran: {codes}."
    )


def _schema(args: argparse.Namespace) -> int:
    print(json.dumps(policy_schema(), indent=2))
    return 0


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    policies = verbs.add_parser("policies", help="list the shipped policy packs, show a policy")
    actions = policies.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the shipped packs")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(run=_list)
    show = actions.add_parser("show", help="the routes of a pack or a policy file")
    show.add_argument("name", metavar="NAME", help="a shipped pack name or a policy YAML file")
    show.add_argument("--json", action="store_true", help="print the whole policy as JSON")
    show.set_defaults(run=_show)
    schema = actions.add_parser("schema", help="the JSON schema of policy files")
    schema.set_defaults(run=_schema)
