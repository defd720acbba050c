"""What users read about policies stays true: the docs' route tables, the schema, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from idemproxy.cli import main
from idemproxy.policies.catalog import markdown_route_tables, policy_schema
from idemproxy.policies.loader import load_policy, shipped_packs

REPO = Path(__file__).resolve().parents[2]


def test_docs_list_every_shipped_route() -> None:
    doc = (REPO / "docs" / "policies.md").read_text(encoding="utf-8")
    assert markdown_route_tables() in doc, "run scripts/policy-docs.py to regenerate the tables"
    for name in shipped_packs():
        policy = load_policy(name)
        for route in (*policy.routes, policy.default):
            assert f"| `{route.name}` |" in doc


def test_the_committed_schema_is_the_models() -> None:
    committed = json.loads((REPO / "schemas" / "policy.schema.json").read_text(encoding="utf-8"))
    assert committed == policy_schema(), (
        "run `idemproxy policies schema > schemas/policy.schema.json` after changing the model"
    )


def test_the_schema_describes_every_policy_and_route_field() -> None:
    schema = policy_schema()
    assert set(schema["properties"]) == {
        "name", "description", "adapter", "native_window_s", "scope", "mcp", "routes", "default",
    }  # fmt: skip
    route = schema["$defs"]["Route"]
    assert route["additionalProperties"] is False
    assert {"native_key", "volatile_fields", "retry", "lease_ms", "ttl_s"} <= set(
        route["properties"]
    )
    tool = schema["$defs"]["McpTool"]
    assert set(tool["properties"]) == {
        "name", "effect", "volatile_arguments", "tool_call_effects", "compensation",
    }  # fmt: skip


def test_policies_list_names_every_pack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["PACK", "ADAPTER", "ROUTES", "DESCRIPTION"]
    assert [line.split()[0] for line in lines[1:]] == shipped_packs()

    assert main(["policies", "list", "--json"]) == 0
    packs = {pack["name"]: pack for pack in json.loads(capsys.readouterr().out)}
    assert packs["stripe"]["adapter"] == "stripe"
    assert packs["discord"]["native_window_s"] == 120


def test_policies_show_lists_the_routes_in_the_order_they_are_tried(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policies", "show", "bluesky"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("policy bluesky (adapter bluesky)")
    names = [line.split()[0] for line in out.split("ROUTE", 1)[1].splitlines()[1:]]
    policy = load_policy("bluesky")
    assert names == [route.name for route in (*policy.routes, policy.default)]
    assert "create_record      POST" in out


def test_policies_show_a_file_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nroutes:\n  - {name: read, match: {methods: GET}, effect: safe}\n"
                    "default: {name: write}\n")  # fmt: skip

    assert main(["policies", "show", str(path), "--json"]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert [route["name"] for route in shown["routes"]] == ["read"]
    assert shown["default"]["effect"] == "external"


def test_policies_show_an_unknown_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies", "show", "nope"]) == 2
    assert "neither a shipped pack" in capsys.readouterr().err


def test_policies_show_names_an_mcp_server_s_tools(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    policy = tmp_path / "tools.yaml"
    policy.write_text(
        "name: tools\nmcp:\n  tools:\n    - {name: read_count, effect: safe}\n"
        "    - name: send_message\n      volatile_arguments: [/sent_at]\n"
        "      compensation: {tool: delete_message, arguments: {id: '{response./result/id}'}}\n"
        "default: {name: mcp}\n"
    )
    assert main(["policies", "show", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "readOnlyHint: not trusted" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("read_", "send_"))]
    assert rows == [
        ["read_count", "safe"],
        ["send_message", "external", "/sent_at", "tools/call", "delete_message"],
    ]
