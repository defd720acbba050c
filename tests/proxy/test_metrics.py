"""What the proxy's metrics count of the traffic through it (in-process, memory store)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.metrics import AGENT_LABELS_MAX, OTHER_AGENTS
from idemproxy.proxy.state import ProxyState
from tests.effects.test_flow import TOOL_CALL, write_policy
from tests.proxy.conftest import ProxyFactory

Client = TestClient[web.Request, web.Application]


def upstream_timed(state: ProxyState) -> float:
    """How many upstream exchanges ``idemproxy_upstream_request_duration_seconds`` counted."""
    value = state.metrics.registry.get_sample_value(
        "idemproxy_upstream_request_duration_seconds_count", {"upstream": "up"}
    )
    return value or 0.0


async def test_every_forward_is_timed_effects_as_well_as_reads(
    make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, "effect: external\non_missing_key: passthrough")
    client, state = await make_proxy(policy=policy)

    effect = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)
    assert effect.headers["Idem-Outcome"] == "forwarded"
    assert upstream_timed(state) == 1
    replay = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)
    assert replay.headers["Idem-Outcome"] == "replayed"
    assert upstream_timed(state) == 1  # a replay never reaches the upstream
    unprotected = await client.post("/up/messages", data=b'{"content":"no key"}')
    assert unprotected.status == 200
    assert upstream_timed(state) == 2
    failed = await client.post(
        "/up/status/500", data=b"{}", headers={**TOOL_CALL, "Idem-Step": "2"}
    )
    assert failed.status == 500
    assert upstream_timed(state) == 3  # an error answer is an answer: its time counts


async def test_reads_are_timed(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy()
    read = await client.get("/up/big?bytes=10")
    assert read.status == 200
    assert upstream_timed(state) == 1


def blocked(state: ProxyState, agent: str, kind: str = "replayed") -> float:
    labels = {"upstream": "up", "route": "write", "kind": kind, "agent": agent}
    value = state.metrics.registry.get_sample_value("idemproxy_duplicates_blocked_total", labels)
    return value or 0.0


async def test_blocked_duplicates_name_the_agent_that_repeats(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy(agent_id="sidecar-bot")
    for _ in range(3):
        await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)
    helper = {**TOOL_CALL, "Idem-Agent": "helper-bot"}
    for _ in range(2):
        await client.post("/up/messages", data=b'{"content":"hi"}', headers=helper)

    assert blocked(state, "sidecar-bot") == 2
    assert blocked(state, "helper-bot") == 1
    (bot, other) = state.metrics.blocked.summary()["agents"]
    assert (bot["agent"], bot["blocked"]) == ("sidecar-bot", 2)
    assert bot["batches"][0]["batch"] == "batch-1"
    assert bot["top_routes"] == [{"upstream": "up", "route": "write", "blocked": 2}]
    assert (other["agent"], other["blocked"]) == ("helper-bot", 1)


async def test_agents_past_the_label_limit_share_one_label(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy()
    agents = [f"agent-{n}" for n in range(AGENT_LABELS_MAX + 2)]
    for agent in agents:
        headers = {**TOOL_CALL, "Idem-Agent": agent}
        for _ in range(2):
            await client.post("/up/messages", data=b'{"content":"hi"}', headers=headers)

    assert blocked(state, agents[0]) == 1
    assert blocked(state, agents[AGENT_LABELS_MAX - 1]) == 1
    assert blocked(state, agents[AGENT_LABELS_MAX]) == 0
    assert blocked(state, OTHER_AGENTS) == 2
    # The summary names every one of them.
    assert len(state.metrics.blocked.summary()["agents"]) == len(agents)
