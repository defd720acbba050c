"""An idle proxy's background work does not grow with the agents it ever saw.

Counted on a private redis-server (nothing else talks to it): the commands one sweep pass and
one delivery pass send, with the agent registry empty and with 3,000 agents in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
from aiohttp import ClientSession

from idemproxy.admin.background import WebhookTransport
from idemproxy.config.settings import ControllerConfig
from idemproxy.ledger.delivery import Delivery, Posted
from idemproxy.ledger.sweeper import Sweeper
from idemproxy.metrics import Metrics
from idemproxy.store.control import Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.records import RecordState
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.agents import CHECKS_PER_PASS
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.work import Work
from tests.ledger.conftest import SECRET, make_effect
from tests.store.conftest import RedisServer, redis_server
from tests.support.controller import Controller

POD = {"store_scope": "pod"}  # the labels of a gauge read from a pod's own store

__all__ = ["redis_server"]

AGENTS = 3_000


class Unreachable:
    """A controller transport that must not be used: an idle pass has nothing to send."""

    async def post(self, body: bytes, headers: object) -> Posted:
        raise AssertionError("an idle pass posted a delivery")


@pytest.fixture
async def admin(redis_server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()


async def commands_sent(admin: redis.asyncio.Redis) -> int:
    """Commands executed since the last reset, those run inside scripts included."""
    stats = await admin.info("commandstats")
    calls = sum(int(entry["calls"]) for entry in stats.values())
    return calls - 2  # the reset before and this INFO itself


async def one_idle_pass(store: RedisStore, admin: redis.asyncio.Redis) -> int:
    settings = ControllerConfig(url="http://127.0.0.1:1/events", secret=SECRET)
    delivery = Delivery(store, Unreachable(), settings, Metrics())
    await admin.config_resetstat()
    await Sweeper(store, Metrics(), interval_s=5).sweep_once()
    assert not await delivery.deliver_once()
    return await commands_sent(admin)


async def steady_pass(store: RedisStore, admin: redis.asyncio.Redis) -> int:
    """The commands of an idle pass once the store has checked the registry for agents with
    work (a store that finds its worklists unseeded does that first, a page per pass)."""
    for _ in range(AGENTS // CHECKS_PER_PASS + 1):
        await one_idle_pass(store, admin)
    return await one_idle_pass(store, admin)


@pytest.mark.redis
async def test_agents_once_seen_cost_an_idle_pass_nothing(
    redis_server: RedisServer, admin: redis.asyncio.Redis
) -> None:
    # What proxies leave behind: every agent id they served, listed for months.
    now_ms = time.time_ns() // 1_000_000
    await admin.zadd(layout.AGENTS_KEY, {f"agent-{i}".encode(): now_ms for i in range(AGENTS)})
    store = RedisStore.from_url(redis_server.url)
    try:
        full = await steady_pass(store, admin)
        await admin.flushall()
        empty = await steady_pass(store, admin)
    finally:
        await store.close()
    assert full == empty, f"{empty} commands with no agent, {full} with {AGENTS} idle ones"


def delivering(store: RedisStore, session: ClientSession, controller: Controller) -> Delivery:
    settings = ControllerConfig(url=controller.url, secret=SECRET)
    transport = WebhookTransport(session, controller.url, settings.timeout_s)
    return Delivery(store, transport, settings, Metrics())


@pytest.mark.redis
async def test_agents_with_work_are_swept_and_delivered_among_idle_ones(
    redis_server: RedisServer, admin: redis.asyncio.Redis, controller: Controller
) -> None:
    now_ms = time.time_ns() // 1_000_000
    await admin.zadd(layout.AGENTS_KEY, {f"agent-{i}".encode(): now_ms for i in range(AGENTS)})
    store = RedisStore.from_url(redis_server.url)
    metrics = Metrics()
    sweeper = Sweeper(store, metrics, interval_s=5)
    try:
        for _ in range(AGENTS // CHECKS_PER_PASS + 1):
            await sweeper.sweep_once()  # the registry checked: none of those has work
        lapsed = await make_effect(store, "lapsed", "b1", "c1", None, lease_ms=50)
        await make_effect(store, "settled", "b1", "c1", RecordState.COMPLETED)
        pause = Pause(PauseOrigin.OPERATOR, "hands off", "alice")
        audit = AuditEntry("paused", "agent.pause", "alice", "paused")
        assert await store.write_pause(PauseRequest("paused", 0, pause, audit))
        await asyncio.sleep(0.1)  # the lease runs out

        await sweeper.sweep_once()
        async with ClientSession() as session:
            courier = delivering(store, session, controller)
            while await courier.deliver_once():
                pass

        record = await store.get(lapsed)
        assert record is not None
        assert record.state is RecordState.UNKNOWN
        assert metrics.registry.get_sample_value("idemproxy_unknown_outcomes", POD) == 1
        assert metrics.registry.get_sample_value("idemproxy_agents_paused", POD) == 1
        assert [e["type"] for e in controller.events("lapsed")] == ["effect.unknown", "agent.error"]
        assert [e["type"] for e in controller.events("settled")] == ["effect.completed"]
    finally:
        await store.close()


@pytest.mark.redis
async def test_agents_whose_work_is_done_leave_the_worklists(
    redis_server: RedisServer, admin: redis.asyncio.Redis, controller: Controller
) -> None:
    # A grace of 0: this test's store is the only one on its server.
    store = RedisStore.from_url(redis_server.url, listing_grace_s=0)
    try:
        empty = await steady_pass(store, admin)
        for i in range(300):
            await make_effect(store, f"agent-{i}", "b1", "c1", RecordState.COMPLETED)
        async with ClientSession() as session:
            courier = delivering(store, session, controller)
            while await courier.deliver_once():
                pass
        assert len(controller.accepted) == 300

        assert await steady_pass(store, admin) == empty
        assert await store.list_busy_agents(Work.REVIEW) == []
        assert await store.list_busy_agents(Work.DELIVERY) == []
    finally:
        await store.close()
