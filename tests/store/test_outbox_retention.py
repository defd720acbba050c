"""The outbox keeps every event the recovery controller has not accepted, past the retention.

Events older than the retention are history; an event a controller is delivered but has not
accepted yet (a parked delivery, a controller down for a week) is work, and dropping it would
leave the controller blind to an effect. An agent without a delivery cursor has no controller
waiting, so its events are trimmed by age as before.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import fakeredis
import pytest

from idemproxy.store.journal import DeliveryCursor
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordKey, RecordState, Settlement
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.retention import Retention
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import REDIS_URL, delete_keys
from tests.store.test_contract import claim_fence, claim_request

RETENTION_S = 1
RETENTION = Retention(events_s=RETENTION_S)

Opener = Callable[[], Store]


@pytest.fixture(params=["sqlite", "fakeredis", pytest.param("redis", marks=pytest.mark.redis)])
async def opener(request: pytest.FixtureRequest, tmp_path: Path, ns: str) -> AsyncIterator[Opener]:
    """Opens the backend with a one-second retention, each time as a new store on the same data
    (SQLite purges on the first write of a store)."""
    server = fakeredis.FakeServer()

    def open_store() -> Store:
        if request.param == "sqlite":
            return SQLiteStore(tmp_path / "effects.db", retention=RETENTION)
        if request.param == "fakeredis":
            client = fakeredis.FakeAsyncRedis(server=server)
            return RedisStore(client, retention=RETENTION)
        return RedisStore.from_url(REDIS_URL, retention=RETENTION)

    yield open_store
    if request.param == "redis":
        await delete_keys(REDIS_URL, ns)


async def emit(store: Store, agent: str, name: str) -> str:
    """One event of ``agent`` (a not_applied outcome); returns its id."""
    key = RecordKey(agent, f"{name}-{uuid.uuid4().hex[:6]}")
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, Settlement(RecordState.NOT_APPLIED))
    return (await store.read_events(agent, limit=10_000))[-1].event_id


async def acked(store: Store, agent: str, event_id: str) -> None:
    """The controller accepted the agent's events up to ``event_id``."""
    cursor = await store.read_cursor(agent)
    assert await store.write_cursor(agent, DeliveryCursor(acked=event_id, version=cursor.version))


async def after_retention(opener: Opener, write: Callable[[Store], Awaitable[object]]) -> Store:
    await asyncio.sleep(RETENTION_S + 0.3)
    store = opener()
    await write(store)  # a write is what trims
    return store


async def test_undelivered_events_outlive_the_retention(opener: Opener, ns: str) -> None:
    delivered, waiting, quiet = f"{ns}-delivered", f"{ns}-waiting", f"{ns}-quiet"
    store = opener()
    first = await emit(store, delivered, "first")
    second = await emit(store, delivered, "second")
    await acked(store, delivered, first)
    # A delivery that has not had anything accepted yet (its first POST failed).
    await store.write_cursor(waiting, DeliveryCursor(owner="proxy-1", attempts=3))
    stuck = await emit(store, waiting, "stuck")
    await emit(store, quiet, "old")
    await store.close()

    store = await after_retention(opener, lambda s: emit(s, quiet, "new"))
    try:
        assert [e.event_id for e in await store.read_events(delivered, after=first)] == [second]
        assert [e.event_id for e in await store.read_events(waiting)] == [stuck]
        later = await emit(store, delivered, "later")
        assert [e.event_id for e in await store.read_events(delivered, after=first)] == [
            second,
            later,
        ]
    finally:
        await store.close()


async def test_events_are_trimmed_again_once_delivered(opener: Opener, ns: str) -> None:
    agent = f"{ns}-caught-up"
    store = opener()
    old = await emit(store, agent, "old")
    await acked(store, agent, old)
    await store.close()

    store = await after_retention(opener, lambda s: emit(s, f"{ns}-other", "x"))
    try:
        # Delivered and older than the retention: gone, as if no controller waited.
        assert await store.read_events(agent) == []
    finally:
        await store.close()
