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


def act(
    proxy: ServedProxy, call: str, name: str, batch: str = BATCH
) -> tuple[int, str, dict[str, Any]]:
    """POST a note as the agent; the status, ``Idem-Outcome`` and the JSON answer."""
    headers = {"Idem-Batch": batch, "Idem-Tool-Call": call, "Content-Type": "application/json"}
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


def test_restart_from_last_external_keeps_what_led_up_to_it_and_frees_what_came_after(
    tmp_path: Path, scripted: tuple[ScriptedUpstream, str]
) -> None:
    upstream, url = scripted
    upstream.script.update({"a": [403], "c": [401], "d": [400]})
    proxy = serve(tmp_path, url)
    with running(proxy):
        answers = [act(proxy, f"call-{name}", name)[0] for name in "abcd"]
        plan = recover(proxy, "--strategy", "restart-from-last-external")
        rerun = [act(proxy, f"call-{name}", name)[:2] for name in "abcd"]

    assert answers == [403, 200, 401, 400]
    # call-a's 403 came before the last completed effect (call-b): the re-run sees it again.
    assert (plan["skip"], plan["resume_from"]) == (["call-a", "call-b"], "call-c")
    assert [key.split(":")[2] for key in plan["cleared"]] == ["call-c", "call-d"]
    assert rerun == [(403, "replayed"), (200, "replayed"), (200, "forwarded"), (200, "forwarded")]
    assert [upstream.count(name) for name in "abcd"] == [1, 1, 2, 2]


def test_selective_names_the_tool_calls_a_rerun_skips_and_where_it_resumes(
    tmp_path: Path, scripted: tuple[ScriptedUpstream, str]
) -> None:
    upstream, url = scripted
    upstream.script["c"] = [429]  # a 429 frees the key at once: nothing was applied
    proxy = serve(tmp_path, url)
    with running(proxy):
        assert [act(proxy, f"call-{name}", name)[0] for name in "abc"] == [200, 200, 429]
        before = progress(proxy)
        code, text = cli("batch-status", AGENT, BATCH, "--admin-url", proxy.admin_url)
        plan = recover(proxy)
    assert (before["strategy"], before["skip"], before["resume_from"]) == (
        "selective",
        ["call-a", "call-b"],
        "call-c",
    )
    assert code == 0, text
    assert "a re-run sends anew from tool call call-c" in text
    assert (plan["skip"], plan["resume_from"]) == (["call-a", "call-b"], "call-c")


def test_rollback_to_a_batch_undoes_every_later_batch_newest_first_and_marks_it(
    tmp_path: Path, scripted: tuple[ScriptedUpstream, str]
) -> None:
    upstream, url = scripted
    proxy = serve(tmp_path, url)
    admin = ("--admin-url", proxy.admin_url)
    with running(proxy):
        for batch in ("day-1", "day-2", "day-3"):
            assert act(proxy, "call-1", batch, batch)[0] == 200
        code, shown = cli("recover", AGENT, "--rollback-to", "day-1", *admin)
        assert code == 0, shown
        assert upstream.deleted == []
        code, out = cli("recover", AGENT, "--rollback-to", "day-1", "--yes", *admin, "--json")
        assert code == 0, out
        repeats = [act(proxy, "call-1", batch, batch)[:2] for batch in ("day-1", "day-2")]
        code, again = cli("recover", AGENT, "--rollback-to", "day-1", "--yes", *admin, "--json")
        code_last, latest = cli("recover", AGENT, "--rollback-to", "day-3", *admin)
        code_both, both = cli("recover", AGENT, "day-2", "--rollback-to", "day-1", *admin)

    assert "plan to roll back agent notes-bot to the end of batch day-1" in shown
    assert shown.index("batch day-3") < shown.index("batch day-2")
    done = orjson.loads(out)
    assert (done["target"], done["undone"]) == ("day-1", ["day-3", "day-2"])
    assert upstream.deleted == ["day-3-3", "day-2-2"]  # newest first, each once
    assert repeats == [(200, "replayed"), (409, "replayed")]
    assert code == 0, again
    assert [[u["state"] for u in b["undo"]] for b in orjson.loads(again)["batches"]] == [
        ["undone"],
        ["undone"],
    ]
    assert upstream.deleted == ["day-3-3", "day-2-2"]
    assert (code_last, "no later batch to undo" in latest) == (1, True)
    assert (code_both, "give no other batch" in both) == (2, True)
