"""Delivery to the recovery controller from `idemproxy serve`: through refusals, a controller
restart and a proxy killed mid-delivery, every event arrives, signed, in order per agent."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.controller import Controller
from tests.support.processes import FakeUpstream, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

SECRET = "e2e-webhook-secret-0123456789"
AGENTS = ("agent-a", "agent-b")
WAIT_S = 30.0


def proxy_for(tmp_path: Path, upstream: FakeUpstream, controller: Controller) -> ServedProxy:
    env = {
        "IDEMPROXY_CONTROLLER__URL": controller.url,
        "IDEMPROXY_CONTROLLER__SECRET": SECRET,
        "IDEMPROXY_CONTROLLER__ATTEMPTS": "1000",
        "IDEMPROXY_CONTROLLER__BACKOFF_S": "0.05",
        "IDEMPROXY_CONTROLLER__MAX_BACKOFF_S": "0.3",
        "IDEMPROXY_CONTROLLER__POLL_INTERVAL_S": "0.1",
        "IDEMPROXY_CONTROLLER__TIMEOUT_S": "1.5",
        "IDEMPROXY_CONTROLLER__BATCH_SIZE": "3",
    }
    store = f"sqlite:///{tmp_path}/effects.db"
    return ServedProxy(tmp_path, "--upstream", f"up={upstream.url}/api", "--store", store, env=env)


async def effect(proxy: ServedProxy, agent: str, call: int) -> None:
    headers = {"Idem-Agent": agent, "Idem-Batch": "b1", "Idem-Tool-Call": f"call-{call}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}/up/messages", json={"n": call}, headers=headers) as response,
    ):
        assert response.status == 200


def stored_events(proxy: ServedProxy, agent: str) -> list[dict[str, Any]]:
    status, body = http_get(f"{proxy.admin_url}/v1/agents/{agent}/events?limit=1000")
    assert status == 200
    events: list[dict[str, Any]] = orjson.loads(body)["events"]
    return events


def metric(proxy: ServedProxy, name: str) -> float:
    text = http_get(f"{proxy.admin_url}/metrics")[1].decode()
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def all_delivered(proxy: ServedProxy, controller: Controller) -> bool:
    """Wait until the controller holds every stored event and the backlog gauge reads 0."""
    for _ in range(int(WAIT_S / 0.1)):
        expected = {agent: [e["event_id"] for e in stored_events(proxy, agent)] for agent in AGENTS}
        complete = all(controller.event_ids(agent) == ids for agent, ids in expected.items())
        if complete and metric(proxy, "idemproxy_controller_backlog") == 0:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_refusals_and_a_controller_restart_lose_nothing(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    controller = Controller(SECRET, refuse_next=3)
    await controller.start()
    proxy = proxy_for(tmp_path, upstream, controller)
    try:
        with running(proxy):
            for call in (1, 2):
                for agent in AGENTS:
                    await effect(proxy, agent, call)
            for _ in range(100):
                if controller.refused == 3 and controller.accepted:
                    break
                await asyncio.sleep(0.05)
            await controller.stop()  # down for a while, then back on the same port
            for call in (3, 4, 1):  # the repeat of call 1 adds an effect.replayed event
                for agent in AGENTS:
                    await effect(proxy, agent, call)
            await asyncio.sleep(1.0)
            await controller.start()

            assert await all_delivered(proxy, controller)
            failed = metric(proxy, 'idemproxy_controller_events_total{result="failed"}')
            events = {agent: stored_events(proxy, agent) for agent in AGENTS}
    finally:
        await controller.stop()

    assert controller.refused == 3
    assert failed > 0
    assert controller.forged == 0
    assert all(delivery.verified for delivery in controller.accepted)
    for agent in AGENTS:
        types = [event["type"] for event in events[agent]]
        assert types == ["effect.completed"] * 4 + ["effect.replayed"]
        # First arrivals come in the store's order; a repeat only ever re-sends a batch.
        assert controller.event_ids(agent) == [event["event_id"] for event in events[agent]]
    assert len(upstream.effects("/messages")) == 8


async def test_a_proxy_killed_mid_delivery_loses_nothing_after_a_restart(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    controller = Controller(SECRET, delay_s=1.0)
    await controller.start()
    try:
        first = proxy_for(tmp_path, upstream, controller)
        with running(first):
            for call in (1, 2):
                for agent in AGENTS:
                    await effect(first, agent, call)
            # The proxy answers first and records the outcome right after; kill it only once
            # all four are recorded, so the test is about delivery, not that short window.
            for _ in range(100):
                recorded = all(len(stored_events(first, agent)) == 2 for agent in AGENTS)
                if controller.received and recorded:
                    break
                await asyncio.sleep(0.05)
            assert controller.received
            first.kill()  # SIGKILL while the controller still holds its POST: no ack
        controller.delay_s = 0

        second = proxy_for(tmp_path, upstream, controller)
        with running(second):
            await effect(second, "agent-a", 3)
            assert await all_delivered(second, controller)
            events = {agent: stored_events(second, agent) for agent in AGENTS}
    finally:
        await controller.stop()

    for agent in AGENTS:
        assert controller.event_ids(agent) == [event["event_id"] for event in events[agent]]
    assert len(events["agent-a"]) == 3
    assert len(events["agent-b"]) == 2
    assert controller.forged == 0
    # The batch the dead proxy had in flight reached the controller and was sent again.
    assert any(len(controller.events(a)) > len(controller.event_ids(a)) for a in AGENTS)
