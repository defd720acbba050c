"""What only the Redis store's agent lists have: the listing grace that lets a sweep drop an
agent without a lock across slots, the registry's cap, and the walk that finds the work an
older version left unlisted."""

from __future__ import annotations

import asyncio
import time

import fakeredis
import pytest

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.journal import DeliveryCursor
from idemproxy.store.records import Claimed, RecordKey
from idemproxy.store.redis import agents as redis_agents
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.retention import Retention
from idemproxy.store.work import Work
from tests.store.test_contract import claim_request, completed


@pytest.fixture
def server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


def proxy(
    server: fakeredis.FakeServer, listing_grace_s: float = redis_agents.LISTING_GRACE_S
) -> RedisStore:
    """One proxy's store on the shared server."""
    return RedisStore(fakeredis.FakeAsyncRedis(server=server), listing_grace_s=listing_grace_s)


async def done(store: RedisStore, agent: str) -> None:
    """Give the agent one completed effect, delivered: it is left with nothing to do."""
    key = RecordKey(agent, "e1")
    assert isinstance(await store.claim(claim_request(key)), Claimed)
    assert await store.settle(key, 1, completed())
    [event] = await store.read_events(agent)
    assert await store.write_cursor(agent, DeliveryCursor(event.event_id))


async def unlist(store: RedisStore, agent: str) -> None:
    """Take the agent off every worklist, as a sweep that found it idle does."""
    for work in Work:
        await store.agents._client.zrem(layout.worklist_key(work), agent)


async def listed(store: RedisStore, agent: str) -> list[bool]:
    return [agent in await store.list_busy_agents(work) for work in Work]


async def test_an_idle_agent_stays_listed_for_the_grace(server: fakeredis.FakeServer) -> None:
    store = proxy(server)
    await done(store, "bot")
    assert (await store.forget_agents()).idle == 0
    assert await listed(store, "bot") == [True] * len(Work)
    now_idle = proxy(server, listing_grace_s=0)
    assert (await now_idle.forget_agents()).idle == len(Work)
    assert await listed(store, "bot") == [False] * len(Work)


async def test_an_agent_listed_while_the_sweep_checked_it_stays(
    server: fakeredis.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep, other = proxy(server, listing_grace_s=0.05), proxy(server, listing_grace_s=0.05)
    await done(sweep, "bot")
    await sweep.forget_agents()  # the first one seeds the worklists
    await asyncio.sleep(0.06)  # the listing is past the grace
    found_idle = sweep.agents._work_of

    async def claimed_meanwhile(agent: str) -> tuple[int, ...]:
        work = await found_idle(agent)  # nothing yet: its claim is on its way
        await other.agents.register(agent)  # another proxy lists it before claiming
        return work

    monkeypatch.setattr(sweep.agents, "_work_of", claimed_meanwhile)
    assert (await sweep.forget_agents()).idle == 0
    assert await listed(sweep, "bot") == [True] * len(Work)


async def test_a_failed_claim_has_the_next_one_list_its_agent_again(
    server: fakeredis.FakeServer,
) -> None:
    store = proxy(server)
    await done(store, "bot")
    await unlist(store, "bot")  # the listing lapsed and a sweep dropped the agent

    async def timed_out() -> None:
        raise StoreUnavailable("no answer: the claim may yet run")

    with pytest.raises(StoreUnavailable):
        await store.agents.listed("bot", timed_out)
    await store.claim(claim_request(RecordKey("bot", "e2")))
    assert await listed(store, "bot") == [True] * len(Work)


async def test_a_claim_answered_late_lists_its_agent_again(server: fakeredis.FakeServer) -> None:
    store = proxy(server, listing_grace_s=0.2)

    async def slow_claim() -> None:
        await unlist(store, "bot")  # the sweep dropped it while the claim was on its way
        await asyncio.sleep(0.15)  # past half the grace

    await store.agents.listed("bot", slow_claim)
    assert await listed(store, "bot") == [True] * len(Work)


async def test_the_listing_cache_holds_only_recent_agents(server: fakeredis.FakeServer) -> None:
    store = proxy(server, listing_grace_s=0)
    for i in range(50):
        await store.agents.register(f"agent-{i}")
    assert len(store.agents._listed) <= 1


async def test_the_registry_forgets_the_least_recently_seen_past_its_cap(
    server: fakeredis.FakeServer,
) -> None:
    store = RedisStore(fakeredis.FakeAsyncRedis(server=server), registry_cap=3)
    for i in range(5):
        await store.claim(claim_request(RecordKey(f"agent-{i}", "e1")))
        await asyncio.sleep(0.002)  # each seen a millisecond later than the one before
    assert (await store.forget_agents()).over_cap == 2
    assert await store.list_agents() == ["agent-2", "agent-3", "agent-4"]
    # Only the registry forgets: their records are still swept and delivered.
    assert len(await store.list_busy_agents(Work.REVIEW)) == 5
    assert (await store.forget_agents()).over_cap == 0


async def test_work_an_older_version_left_unlisted_is_found(
    server: fakeredis.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = proxy(server)
    await older.claim(claim_request(RecordKey("in-flight", "e1")))
    idle = ["idle-a", "idle-b", "idle-c", "idle-d"]
    for agent in idle:
        await done(older, agent)
    # An older version kept the registry (all seen in one millisecond here) and no worklists.
    client = older.agents._client
    await client.delete(*(layout.worklist_key(work) for work in Work), layout.SEEDED_KEY)
    seen_ms = time.time_ns() // 1_000_000
    await client.zadd(layout.AGENTS_KEY, dict.fromkeys(["in-flight", *idle], seen_ms))

    monkeypatch.setattr(redis_agents, "CHECKS_PER_PASS", 2)
    store = proxy(server)
    for _ in range(3):  # five agents, two a pass
        assert not await client.exists(layout.SEEDED_KEY)
        await store.forget_agents()
    assert await client.exists(layout.SEEDED_KEY)
    assert await store.list_busy_agents(Work.REVIEW) == ["in-flight"]
    assert await store.list_busy_agents(Work.DELIVERY) == ["in-flight"]


def test_the_registry_keeps_an_agent_past_the_longer_of_its_audit_log_and_archives() -> None:
    day_ms = 86_400_000
    assert redis_agents.forget_after_ms(Retention(audit_s=86_400, archive_s=5 * 86_400)) == (
        6 * day_ms
    )
    assert redis_agents.forget_after_ms(Retention()) == 91 * day_ms
