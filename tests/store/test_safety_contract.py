"""The contract of the store's marker (store/safety.py): made once, counted, and every way of
losing it found, kept and acknowledged alike on every backend.

The marker is store-wide, so the real Redis here is a private server of each test: a test
that drops the marker of the shared one would stop every proxy using it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import fakeredis
import pytest
from redis.asyncio import Redis

from idemproxy.store.memory import MemoryStore
from idemproxy.store.memory.safety import MemorySafety
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordKey
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.safety import LossKind, Marker, StoreLogAction
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import RedisServer
from tests.store.test_contract import claim_request

BACKENDS = ["memory", "sqlite", "fakeredis", pytest.param("redis", marks=pytest.mark.redis)]


# Deletes the marker, and with ``log=True`` the store's log too (an emptied store).
Drop = Callable[[bool], Awaitable[None]]


@dataclasses.dataclass
class Marked:
    """A store, and a way to take its marker away behind its back."""

    store: Store
    drop: Drop


@pytest.fixture(params=BACKENDS)
async def marked(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Marked]:
    store: Store
    if request.param == "memory":
        store = MemoryStore()
        drop = memory_drop(store)
    elif request.param == "sqlite":
        store = SQLiteStore(tmp_path / "effects.db")
        drop = sqlite_drop(tmp_path / "effects.db")
    else:
        client: Redis
        if request.param == "fakeredis":
            client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
        else:
            server: RedisServer = request.getfixturevalue("redis_server")
            client = Redis.from_url(server.url)
        store = RedisStore(client)
        drop = redis_drop(client)
    try:
        yield Marked(store, drop)
    finally:
        await store.close()


def memory_drop(store: MemoryStore) -> Drop:
    book = store.safety  # a memory store has no outside to reach in from
    assert isinstance(book, MemorySafety)

    async def drop(log: bool) -> None:
        book._marker = None
        if log:
            book._log.clear()

    return drop


def sqlite_drop(path: Path) -> Drop:
    async def drop(log: bool) -> None:
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("DELETE FROM store_marker")
            if log:
                db.execute("DELETE FROM store_log")

    return drop


def redis_drop(client: Redis) -> Drop:
    async def drop(log: bool) -> None:
        await client.delete(layout.MARKER_KEY)
        if log:
            await client.delete(layout.STORE_LOG_KEY)

    return drop


async def seen_marker(store: Store) -> Marker:
    """The marker as a proxy sees it on its first check."""
    found = await store.check_marker(None)
    assert found.marker is not None
    assert found.loss is None
    return found.marker


async def actions(store: Store) -> list[str]:
    return [entry.action for entry in await store.read_store_log()]


async def test_a_new_store_is_marked_once_then_counted(marked: Marked) -> None:
    store = marked.store
    first = await store.check_marker(None)
    again = await store.check_marker(None)
    assert first.marker is not None
    assert again.marker is not None
    assert (first.created, again.created) == (True, False)
    assert (first.loss, again.loss) == (None, None)
    assert again.marker.epoch == first.marker.epoch
    assert (first.marker.checks, again.marker.checks) == (1, 2)
    assert first.marker.created_ms > 0
    assert await actions(store) == [StoreLogAction.MARKED]


async def test_checks_of_the_marker_a_proxy_saw_find_no_loss(marked: Marked) -> None:
    seen = await seen_marker(marked.store)
    for _ in range(3):
        found = await marked.store.check_marker(seen)
        assert (found.loss, found.detected) == (None, False)
        assert found.marker is not None
        assert found.marker.checks == seen.checks + 1
        seen = found.marker


async def test_concurrent_first_checks_make_one_marker(marked: Marked) -> None:
    found = await asyncio.gather(*(marked.store.check_marker(None) for _ in range(8)))
    assert len({check.marker.epoch for check in found if check.marker}) == 1
    assert sum(check.created for check in found) == 1
    assert sorted(check.marker.checks for check in found if check.marker) == list(range(1, 9))


async def test_an_emptied_store_is_a_loss_for_a_proxy_that_saw_its_marker(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)
    await marked.drop(True)

    found = await store.check_marker(seen)
    later = await store.check_marker(None)  # another proxy, started since

    assert found.detected
    assert found.loss is not None
    assert found.loss.kind is LossKind.MARKER_GONE
    assert found.loss.epochs == (seen.epoch,)
    assert seen.epoch in found.loss.reason
    assert (later.loss, later.detected) == (found.loss, False)
    assert await actions(store) == [StoreLogAction.LOSS_DETECTED]


async def test_a_marker_gone_where_the_log_says_one_was_made_is_a_loss(marked: Marked) -> None:
    store = marked.store
    await seen_marker(store)
    await marked.drop(False)

    found = await store.check_marker(None)

    assert found.loss is not None
    assert found.loss.kind is LossKind.MARKER_GONE_LOGGED
    assert await actions(store) == [StoreLogAction.MARKED, StoreLogAction.LOSS_DETECTED]


async def test_a_store_marked_anew_by_another_proxy_is_a_loss(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)
    await marked.drop(True)
    newcomer = await seen_marker(store)  # started on the emptied store: it looks new

    found = await store.check_marker(seen)

    assert found.loss is not None
    assert found.loss.kind is LossKind.MARKER_CHANGED
    assert found.loss.epochs == (seen.epoch, newcomer.epoch)
    assert (await store.check_marker(newcomer)).loss == found.loss


async def test_a_store_gone_back_to_an_older_state_is_a_loss(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)
    ahead = dataclasses.replace(seen, checks=seen.checks + 5)  # as after checks since rolled back

    found = await store.check_marker(ahead)

    assert found.loss is not None
    assert found.loss.kind is LossKind.WENT_BACK
    assert "2 checks where 6 were seen" in found.loss.reason


async def test_an_acknowledged_loss_gives_a_marker_every_proxy_takes_up(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)
    await marked.drop(True)
    newcomer = await seen_marker(store)
    loss = (await store.check_marker(seen)).loss
    assert loss is not None

    assert await store.acknowledge_loss("some-other-loss", "alice", "") is None
    assert (await store.check_marker(None)).loss == loss
    marker = await store.acknowledge_loss(loss.loss_id, "alice", "checked every charge")
    assert marker is not None
    assert await store.acknowledge_loss(loss.loss_id, "alice", "again") is None

    assert set(marker.replaces) == {seen.epoch, newcomer.epoch}
    for proxy in (seen, newcomer, None):
        found = await store.check_marker(proxy)
        assert (found.loss, found.detected) == (None, False)
        assert found.marker is not None
        assert found.marker.epoch == marker.epoch
    log = await store.read_store_log()
    assert log[-1].action == StoreLogAction.LOSS_ACKNOWLEDGED
    assert (log[-1].actor, log[-1].note, log[-1].after) == (
        "alice",
        "checked every charge",
        marker.epoch,
    )
    assert log[-1].ts_ms >= log[-2].ts_ms > 0


async def test_a_loss_found_otherwise_stands_until_acknowledged(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)

    loss = await store.record_loss(LossKind.EVICTED, "247 keys")
    again = await store.record_loss(LossKind.EVICTED, "3 more keys")

    assert again == loss
    assert loss.epochs == (seen.epoch,)
    assert "247 keys" in loss.reason
    assert (await store.check_marker(seen)).loss == loss
    assert await store.acknowledge_loss(loss.loss_id, "bob", "") is not None
    assert (await store.check_marker(seen)).loss is None


async def test_a_store_with_records_but_no_marker_yet_is_marked(marked: Marked, ns: str) -> None:
    # A store written before markers existed: nothing in it says a marker was ever made.
    await marked.store.claim(claim_request(RecordKey(ns, "e1")))
    found = await marked.store.check_marker(None)
    assert found.created
    assert found.loss is None


async def test_the_log_is_read_newest_last_and_limited(marked: Marked) -> None:
    store = marked.store
    seen = await seen_marker(store)
    loss = await store.record_loss(LossKind.EVICTED, "1 key")
    await store.acknowledge_loss(loss.loss_id, "alice", "")
    assert [entry.action for entry in await store.read_store_log(limit=2)] == [
        StoreLogAction.LOSS_DETECTED,
        StoreLogAction.LOSS_ACKNOWLEDGED,
    ]
    assert await store.read_store_log(limit=0) == []
    assert all(entry.agent == "" for entry in await store.read_store_log())
    assert seen.epoch in (await store.read_store_log())[1].before
