"""The seed scenario once per agent framework, with the real packages, through `idemproxy serve`.

A batch of three tool calls crashes after two effects (an exception in the agent, or the
agent's process SIGKILLed); the agent restarts, reads its recovery context and re-runs the
batch. The fake model re-plans whenever it is asked (new tool call ids,
new text), so only replayed generations bring the same tool calls back: it sees each generation
once, and the side-effect upstream sees each update once.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import orjson
import pytest

from tests.support.fakes.planner import PLANNER, Planner, build_planner_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import REPO, FakeUpstream, ServedProxy, running
from tests.support.recovery import read_recovery_context
from tests.support.rerun_agents import (
    AgentCrashed,
    Update,
    poster,
    run_langgraph,
    run_openai_agents,
)

pytestmark = pytest.mark.e2e

AGENT_ID = "release-agent"
POLICY = (
    "name: updates\n"
    "routes:\n  - name: read\n    match: {methods: GET}\n    effect: safe\n"
    "default: {name: post_update, external_id: /id}\n"
)


@dataclass
class Setup:
    proxy: ServedProxy
    upstream: FakeUpstream
    planner: Planner


@pytest.fixture
def setup(tmp_path: Path, upstream: FakeUpstream) -> Iterator[Setup]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_planner_app()
        llm_url = servers.serve(app)
        policy = tmp_path / "updates.yaml"
        policy.write_text(POLICY)
        config = tmp_path / "idemproxy.yaml"
        config.write_text(
            f"agent_id: {AGENT_ID}\nstore: sqlite:///{tmp_path}/store.db\nupstreams:\n"
            f"  openai:\n    url: {llm_url}\n"
            f"  up:\n    url: {upstream.url}/api\n    policy: {policy}\n"
        )
        proxy = ServedProxy(tmp_path, "--config", str(config))
        with running(proxy):
            yield Setup(proxy, upstream, app[PLANNER])
    finally:
        servers.stop()


def run_langgraph_async(llm_url: str, batch: str, post: Update) -> Awaitable[str]:
    return asyncio.to_thread(run_langgraph, llm_url, batch, post)


Runner = Callable[[str, str, Update], Awaitable[str]]


@pytest.mark.parametrize(
    "run", [run_openai_agents, run_langgraph_async], ids=["openai-agents", "langgraph"]
)
async def test_a_crashed_batch_reruns_with_its_generations_replayed_and_no_second_effect(
    setup: Setup, run: Runner
) -> None:
    batch = f"release-{uuid.uuid4().hex[:8]}"
    llm = f"{setup.proxy.url}/openai"

    with pytest.raises(AgentCrashed):
        await run(llm, batch, poster(setup.proxy.url, crash_on="update 3"))
    assert len(setup.upstream.effects("/messages")) == 2

    context = read_recovery_context(setup.proxy, AGENT_ID, batch)
    assert context.completed_tool_calls == ["call_plan1", "call_plan2"]
    assert context.completed_generations == 3
    # The text for the agent's system message names what must not be done again.
    assert all(call in context.context.text for call in ("call_plan1", "call_plan2"))
    assert context.context.strategy == "selective"

    assert await run(llm, batch, poster(setup.proxy.url)) == "done"

    generations = setup.planner.generations
    # Three generations before the crash, replayed on the re-run; the fourth is new.
    assert [g.answer["id"] for g in generations] == [f"chatcmpl-{n}" for n in (1, 2, 3, 4)]
    effects = setup.upstream.effects("/messages")
    assert [orjson.loads(e["body"])["text"] for e in effects] == [
        f"update {n} (plan {n})" for n in (1, 2, 3)
    ]
    # The proxy keyed them so: each update by its tool call, each generation by its step.
    after = read_recovery_context(setup.proxy, AGENT_ID, batch)
    assert after.completed_tool_calls == ["call_plan1", "call_plan2", "call_plan3"]
    assert after.completed_generations == 4


async def test_a_rerun_that_asks_anew_is_refused_and_neither_generates_nor_acts(
    setup: Setup,
) -> None:
    batch = f"release-{uuid.uuid4().hex[:8]}"
    llm = f"{setup.proxy.url}/openai"
    with pytest.raises(AgentCrashed):
        await run_openai_agents(llm, batch, poster(setup.proxy.url, crash_on="update 3"))

    # The re-run tells the model what already happened: its first request is not the recorded
    # one, and a new generation would plan new tool calls.
    reworded = "Two updates were already posted. Post the release's updates."
    with pytest.raises(openai.ConflictError) as refused:
        await run_openai_agents(llm, batch, poster(setup.proxy.url), instructions=reworded)

    assert refused.value.status_code == 409
    assert "tool-call-already-acted" in str(refused.value.body)
    assert len(setup.planner.generations) == 3
    assert len(setup.upstream.effects("/messages")) == 2


def run_agent_process(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tests.support.rerun_process", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("framework", ["openai-agents", "langgraph"])
def test_an_agent_process_killed_mid_batch_reruns_with_no_second_effect(
    setup: Setup, framework: str
) -> None:
    batch = f"release-{uuid.uuid4().hex[:8]}"
    llm = f"{setup.proxy.url}/openai"

    killed = run_agent_process(framework, llm, setup.proxy.url, batch, "update 3")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(setup.upstream.effects("/messages")) == 2

    # The restarted agent asks what its batch did, then runs it again.
    context = read_recovery_context(setup.proxy, AGENT_ID, batch)
    assert context.completed_tool_calls == ["call_plan1", "call_plan2"]
    rerun = run_agent_process(framework, llm, setup.proxy.url, batch)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.strip() == "done"

    assert [g.answer["id"] for g in setup.planner.generations] == [
        f"chatcmpl-{n}" for n in (1, 2, 3, 4)
    ]
    effects = setup.upstream.effects("/messages")
    assert [orjson.loads(e["body"])["text"] for e in effects] == [
        f"update {n} (plan {n})" for n in (1, 2, 3)
    ]
