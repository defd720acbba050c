"""The agent in error end to end, through `idemproxy serve` on SQLite and the CLI: an effect
whose upstream times out puts the agent in error (status, metrics, ``agent.error`` to the
controller) until it is resolved; failures that auto-pause it send ``agent.paused``, a resume
``agent.resumed`` and an abandoned batch ``batch.abandoned``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.e2e.test_recovery import cli
from tests.support.controller import Controller
from tests.support.processes import FakeUpstream, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

AGENT = "notes-bot"
SECRET = "e2e-webhook-secret-0123456789"
WAIT_S = 20.0


def serve(tmp_path: Path, upstream: FakeUpstream, controller: Controller) -> ServedProxy:
    env = {
        "IDEMPROXY_CONTROLLER__URL": controller.url,
        "IDEMPROXY_CONTROLLER__SECRET": SECRET,
        "IDEMPROXY_CONTROLLER__POLL_INTERVAL_S": "0.1",
        "IDEMPROXY_RECOVERY__SWEEP_INTERVAL_S": "0.2",
        "IDEMPROXY_RECOVERY__PAUSE_AFTER_FAILURES": "3",
        "IDEMPROXY_UPSTREAMS__UP__READ_TIMEOUT_S": "0.5",
    }
    return ServedProxy(
        tmp_path,
        "--upstream", f"up={upstream.url}/api",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
        env=env,
    )  # fmt: skip


async def post(proxy: ServedProxy, path: str, batch: str, call: str) -> tuple[int, str, str]:
    """The agent's effect: status, Idem-Outcome and Idem-Key of the answer."""
    headers = {"Idem-Batch": batch, "Idem-Tool-Call": call}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}/up/{path}", json={"call": call}, headers=headers) as answer,
    ):
        return answer.status, answer.headers["Idem-Outcome"], answer.headers["Idem-Key"]


async def run_cli(*argv: str) -> tuple[int, str]:
    return await asyncio.to_thread(cli, *argv)


async def agent_document(proxy: ServedProxy) -> dict[str, Any]:
    code, out = await run_cli("agent", "status", AGENT, "--admin-url", proxy.admin_url, "--json")
    assert code == 0, out
    document: dict[str, Any] = orjson.loads(out)
    return document


def metric(proxy: ServedProxy, name: str, labels: str) -> float:
    text = http_get(f"{proxy.admin_url}/metrics")[1].decode()
    found = re.search(rf"^{re.escape(name)}{{{labels}[^}}]*}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def until(check: Any) -> Any:
    """``check()`` once it is truthy, waiting up to WAIT_S."""
    for _ in range(int(WAIT_S / 0.1)):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.1)
    return check()


def received(controller: Controller, event_type: str) -> list[dict[str, Any]]:
    return [event for event in controller.events(AGENT) if event["type"] == event_type]


async def test_an_agent_in_error_is_shown_counted_sent_and_cleared_by_recovery(
    tmp_path: Path,
) -> None:
    controller = Controller(SECRET)
    await controller.start()
    upstream = FakeUpstream(tmp_path)
    proxy = serve(tmp_path, upstream, controller)
    try:
        with running(upstream), running(proxy):
            status, outcome, key = await post(proxy, "hang", "b1", "call-1")
            assert status >= 500, outcome

            document = await agent_document(proxy)
            error = document["error"]
            assert (error["reason"], error["batch"], error["effect_key"]) == (
                "unknown_outcome",
                "b1",
                key,
            )
            assert error["strategy"] == "manual_only"
            assert f"idemproxy review resolve {key}" in error["hint"]
            in_error = 'reason="unknown_outcome"'
            assert await until(lambda: metric(proxy, "idemproxy_agents_in_error", in_error)) == 1
            seconds = f'agent="{AGENT}"'
            assert await until(lambda: metric(proxy, "idemproxy_agent_error_seconds", seconds) > 0)
            [sent] = await until(lambda: received(controller, "agent.error"))
            assert (sent["effect_key"], sent["batch"], sent["state"]) == (key, "b1", "unknown")
            code, out = await run_cli("status", "--admin-url", proxy.admin_url)
            assert "1 agent(s) in error" in out, out

            code, out = await run_cli(
                "review", "resolve", key, "--as", "not-applied", "--admin-url", proxy.admin_url
            )
            assert code == 0, out
            assert (await agent_document(proxy))["error"] is None
            assert await until(lambda: metric(proxy, "idemproxy_agent_error_seconds", seconds) == 0)

            # The unknown outcome was the first failure in a row: two refusals make three.
            for call in ("call-2", "call-3"):
                assert (await post(proxy, "status/403", "b2", call))[0] == 403
            [paused] = await until(lambda: received(controller, "agent.paused"))
            assert paused["batch"] == "b2"
            assert paused["reason"].startswith("auto-paused after 3 consecutive failures")
            error = (await agent_document(proxy))["error"]
            assert (error["reason"], error["batch"]) == ("paused", "b2")
            failed = f'agent="{AGENT}"'
            assert metric(proxy, "idemproxy_agent_failed_effects_total", failed) == 3

            code, out = await run_cli(
                "agent", "resume", AGENT, "--admin-url", proxy.admin_url, "--note", "token fixed"
            )
            assert code == 0, out
            [resumed] = await until(lambda: received(controller, "agent.resumed"))
            assert (resumed["reason"], resumed["state"]) == ("token fixed", "running")

            code, out = await run_cli(
                "recover", AGENT, "b2", "--strategy", "abandon", "--admin-url", proxy.admin_url
            )
            assert code == 0, out
            [abandoned] = await until(lambda: received(controller, "batch.abandoned"))
            assert (abandoned["batch"], abandoned["effect_key"]) == ("b2", "")
        logged = proxy.output()
    finally:
        await controller.stop()

    assert '"agent in error' in logged
    assert '"batch abandoned"' in logged
    types = [event["type"] for event in controller.events(AGENT)]
    agent_types = [kind for kind in dict.fromkeys(types) if not kind.startswith("effect.")]
    assert agent_types == ["agent.error", "agent.paused", "agent.resumed", "batch.abandoned"]
