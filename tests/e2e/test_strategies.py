"""The recovery strategies end to end through ``idemproxy serve``: a restart frees recorded
failures, selective names where a re-run resumes, restart-from-last-external frees what came
after the last completed effect, and a compensated effect is never replayed as done."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.e2e.test_recovery import cli
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT, BATCH = "notes-bot", "notes-7"
KEYS = ("effect_key", "compensation_key")


@dataclass
class ScriptedUpstream:
    """Answers each POST with the next status scripted for its path (200 once they run out)."""

    script: dict[str, list[int]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def post(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.seen.append(name)
        statuses = self.script.get(name, [])
        status = statuses.pop(0) if statuses else 200
        if status >= 400:
            return web.json_response({"error": f"answered {status}"}, status=status)
        return web.json_response({"id": f"{name}-{len(self.seen)}"}, status=status)

    async def delete(self, request: web.Request) -> web.Response:
        self.deleted.append(request.match_info["id"])
        return web.json_response({"deleted": True})

    def count(self, name: str) -> int:
        return self.seen.count(name)


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedUpstream, str]]:
    servers = BackgroundServers()
    servers.start()
    try:
        upstream = ScriptedUpstream()
        app = web.Application()
        app.router.add_post("/api/notes/{name}", upstream.post)
        app.router.add_delete("/api/notes/{name}/{id}", upstream.delete)
        yield upstream, servers.serve(app) + "/api"
    finally:
        servers.stop()


def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: notes\nroutes:\n"
        "  - name: create_note\n"
        "    match: {methods: [POST], path: '/notes/{name}'}\n"
        "    external_id: /id\n"
        "    compensation: {method: DELETE, path: '/notes/{path.name}/{response./id}'}\n"
        "default: {name: other, lease_ms: 1000}\n"
    )
    return path


def serve(tmp_path: Path, url: str) -> ServedProxy:
    return ServedProxy(
        tmp_path,
        "--upstream", f"up={url}",
        "--policy", f"up={policy_file(tmp_path)}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
    )  # fmt: skip


def act(proxy: ServedProxy, call: str, name: str) -> tuple[int, str, dict[str, Any]]:
    """POST a note as the agent; the status, ``Idem-Outcome`` and the JSON answer."""
    headers = {"Idem-Batch": BATCH, "Idem-Tool-Call": call, "Content-Type": "application/json"}
    body = orjson.dumps({"text": f"note {name}"})
    request = urllib.request.Request(f"{proxy.url}/up/notes/{name}", body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.headers["Idem-Outcome"], orjson.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Idem-Outcome", ""), orjson.loads(error.read())


def recover(proxy: ServedProxy, *argv: str) -> dict[str, Any]:
    code, out = cli("recover", AGENT, BATCH, *argv, "--admin-url", proxy.admin_url, "--json")
    assert code == 0, out
    document: dict[str, Any] = orjson.loads(out)
    return document


def progress(proxy: ServedProxy) -> dict[str, Any]:
    code, out = cli("batch-status", AGENT, BATCH, "--admin-url", proxy.admin_url, "--json")
    assert code == 0, out
    document: dict[str, Any] = orjson.loads(out)
    return document


@pytest.mark.parametrize("strategy", ["restart", "auto"])
def test_a_restart_frees_a_recorded_401_so_the_rerun_reaches_the_upstream_again(
    tmp_path: Path, scripted: tuple[ScriptedUpstream, str], strategy: str
) -> None:
    upstream, url = scripted
    upstream.script["a"] = [401]
    proxy = serve(tmp_path, url)
    with running(proxy):
        assert act(proxy, "call-1", "a")[:2] == (401, "forwarded")
        before = progress(proxy)
        assert (before["strategy"], [a["status"] for a in before["failed"]]) == (
            "restart_batch",
            [401],
        )

        plan = recover(proxy, "--strategy", strategy)
        status, outcome, answer = act(proxy, "call-1", "a")
    assert (status, outcome, answer.get("id")) == (200, "forwarded", "a-2")
    assert plan["cleared"] == [before["failed"][0]["effect_key"]]
    assert upstream.count("a") == 2


def test_a_compensated_effect_is_refused_on_repeat_until_a_restart_sends_it_again(
    tmp_path: Path, scripted: tuple[ScriptedUpstream, str]
) -> None:
    upstream, url = scripted
    proxy = serve(tmp_path, url)
    with running(proxy):
        assert act(proxy, "call-1", "a")[:2] == (200, "forwarded")
        code, out = cli("recover", AGENT, BATCH, "--strategy", "compensate", "--yes",
                        "--admin-url", proxy.admin_url, "--json")  # fmt: skip
        assert code == 0, out
        undo = orjson.loads(out)["undo"]
        assert [u["state"] for u in undo] == ["undone"]
        assert upstream.deleted == ["a-1"]

        status, _, answer = act(proxy, "call-1", "a")
        undone = progress(proxy)
        rerun = recover(proxy, "--strategy", "restart")
        again = act(proxy, "call-1", "a")
        code, second = cli("recover", AGENT, BATCH, "--strategy", "compensate",
                           "--admin-url", proxy.admin_url, "--json")  # fmt: skip

    assert (status, answer.get("type")) == (
        409,
        "https://idemproxy.dev/problems/effect-compensated",
    )
    assert answer["compensation_key"] == undo[0]["compensation_key"]
    assert answer["external_id"] == "a-1"
    assert [a["tool_call"] for a in undone["completed"]] == ["compensate:call-1"]
    assert (undone["failed"], undone["replay"], undone["skip"]) == ([], [], ["call-1"])
    assert [a["compensated_by"] for a in undone["compensated"]] == [undo[0]["compensation_key"]]
    assert undone["strategy"] == "restart_batch"
    assert sorted(rerun["cleared"]) == sorted([u[key] for u in undo for key in KEYS])
    assert again[:2] == (200, "forwarded")
    assert again[2]["id"] == "a-2"
    assert upstream.count("a") == 2
    assert code == 0, second
    assert [u["state"] for u in orjson.loads(second)["undo"]] == ["planned"]
