"""The seed scenario end to end: an agent killed mid-batch, the batch read back, re-run safely.

Real processes: the fake upstream, ``idemproxy serve`` on SQLite, the agent
(tests/support/batch_agent.py, tagging its calls with idemproxy.agent) and the operator CLI.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.processes import REPO, FakeUpstream, Process, ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT_ID = "seed-agent"
BATCH = "snowflake-42"


def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: seed\nroutes:\n  - name: read\n    match: {methods: GET}\n    effect: safe\n"
        "default: {name: post_message, external_id: /id, lease_ms: 1000}\n"
    )
    return path


def cli(*argv: str) -> tuple[int, str]:
    script = Path(sys.executable).parent / "idemproxy"
    done = subprocess.run(
        [str(script), *argv], capture_output=True, text=True, timeout=30, check=False
    )
    return done.returncode, done.stdout + done.stderr


def agent_process(tmp_path: Path, proxy: ServedProxy, name: str, *extra: str) -> Process:
    args = [sys.executable, "-m", "tests.support.batch_agent", proxy.url, BATCH, "3", *extra]
    return Process(name, args, tmp_path, {"PYTHONPATH": str(REPO)})


def answers(process: Process) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in process.output().splitlines() if line.startswith("{")]


async def test_an_agent_killed_after_two_effects_reruns_its_batch_and_only_the_third_is_sent(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"up={upstream.url}/api",
        "--policy", f"up={policy_file(tmp_path)}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT_ID,
    )  # fmt: skip
    with running(proxy):
        doomed = agent_process(tmp_path, proxy, "agent-first-run", "--pause-after", "2")
        doomed.start()
        try:
            for _ in range(200):
                if len(upstream.effects("/messages")) == 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            doomed.kill()  # SIGKILL between the second and the third tool call
        assert len(upstream.effects("/messages")) == 2

        code, out = cli("batch-status", AGENT_ID, BATCH, "--admin-url", proxy.admin_url, "--json")
        assert code == 0, out
        progress = orjson.loads(out)
        assert [a["tool_call"] for a in progress["completed"]] == ["call-1", "call-2"]
        assert [a["external_id"] for a in progress["completed"]] == ["1", "2"]
        assert (progress["failed"], progress["pending"], progress["unknown"]) == ([], [], [])
        assert progress["strategy"] == "selective"
        assert progress["replay"] == ["call-1", "call-2"]

        code, out = cli("recover", AGENT_ID, BATCH, "--admin-url", proxy.admin_url)
        assert code == 0, out
        assert "strategy now: selective" in out

        rerun = agent_process(tmp_path, proxy, "agent-rerun")
        rerun.start()
        assert rerun.wait(30) == 0, rerun.output()

        code, out = cli("batch-status", AGENT_ID, BATCH, "--admin-url", proxy.admin_url)
        assert code == 0, out

    effects = upstream.effects("/messages")
    assert [orjson.loads(e["body"])["text"] for e in effects] == [
        f"update {n} of {BATCH}" for n in (1, 2, 3)
    ]
    assert [(a["tool_call"], a["outcome"], a["id"]) for a in answers(rerun)] == [
        ("call-1", "replayed", "1"),
        ("call-2", "replayed", "2"),
        ("call-3", "forwarded", "3"),
    ]
    assert "completed (3)" in out
