"""What the Redis store says of its durability, and the marker across restarts, on real
redis-servers of each test's own."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import fakeredis
import pytest
import redis
from redis.asyncio import Redis

from idemproxy.store.base import StoreUnavailable
from idemproxy.store.records import RecordKey
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.safety import LossKind
from tests.store.conftest import RedisServer, free_port
from tests.store.test_contract import claim_request, completed
from tests.support.cluster import LocalCluster

pytestmark = pytest.mark.redis


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(redis_server.url)
    yield store
    await store.close()


async def own_server(tmp_path: Path, *args: str) -> RedisServer:
    server = RedisServer(port=free_port(), workdir=tmp_path, extra_args=list(args))
    server.start()
    return server


async def test_durability_is_read_from_config(tmp_path: Path) -> None:
    evicting = await own_server(
        tmp_path, "--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"
    )
    logging = await own_server(tmp_path, "--appendonly", "yes", "--appendfsync", "everysec")
    stores = [RedisStore.from_url(evicting.url), RedisStore.from_url(logging.url)]
    try:
        off, on = [await store.durability() for store in stores]
    finally:
        for store in stores:
            await store.close()
        evicting.stop()
        logging.stop()

    assert (off.eviction_policy, off.persistent) == ("volatile-lru", False)
    assert "appendonly no and no snapshots" in off.persistence
    assert (off.evicted_keys, len(off.server_id)) == (0, 40)
    assert (on.eviction_policy, on.persistent) == ("noeviction", True)
    assert "appendfsync everysec: a crash can lose the last second" in on.persistence


async def test_durability_falls_back_to_info_where_config_is_disabled(tmp_path: Path) -> None:
    # As on managed services, which rename CONFIG away.
    server = await own_server(tmp_path, "--rename-command", "CONFIG", "")
    store = RedisStore.from_url(server.url)
    try:
        durability = await store.durability()
    finally:
        await store.close()
        server.stop()
    assert (durability.eviction_policy, durability.persistent) == ("noeviction", False)
    assert "aof_enabled:0" in durability.persistence
    assert "read from INFO, CONFIG GET is refused" in durability.persistence


async def test_durability_is_unknown_where_neither_can_be_read(redis_server: RedisServer) -> None:
    admin = Redis.from_url(redis_server.url)
    await admin.acl_setuser(
        "proxy", enabled=True, passwords=["+secret"], keys=["*"], channels=["*"],
        commands=["+@all", "-config", "-info"],
    )  # fmt: skip
    await admin.aclose()
    store = RedisStore.from_url(f"redis://proxy:secret@127.0.0.1:{redis_server.port}/0")
    try:
        durability = await store.durability()
    finally:
        await store.close()
    assert (durability.eviction_policy, durability.persistent) == (None, None)
    assert "neither CONFIG GET" in durability.persistence
    assert "nor INFO" in durability.persistence


async def test_a_server_that_knows_neither_command_is_unknown_too() -> None:
    store = RedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()))
    durability = await store.durability()
    await store.close()
    assert (durability.eviction_policy, durability.persistent) == (None, None)


async def test_evictions_are_counted(tmp_path: Path) -> None:
    server = await own_server(tmp_path, "--maxmemory", "3mb", "--maxmemory-policy", "allkeys-lru")
    client = Redis.from_url(server.url)
    store = RedisStore.from_url(server.url)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for number in range(1000):
                pipe.set(f"filler:{number}", b"x" * 10_000)
            await pipe.execute()
        durability = await store.durability()
    finally:
        await store.close()
        await client.aclose()
        server.stop()
    assert durability.evicted_keys is not None
    assert durability.evicted_keys > 0


async def test_a_restart_without_persistence_is_a_loss(
    store: RedisStore, redis_server: RedisServer
) -> None:
    seen = (await store.check_marker(None)).marker
    run_id = (await store.durability()).server_id
    redis_server.stop()
    redis_server.start()

    found = await store.check_marker(seen)

    assert found.loss is not None
    assert found.loss.kind is LossKind.MARKER_GONE
    assert (await store.durability()).server_id != run_id


async def test_a_claim_on_a_store_emptied_since_the_last_check_is_refused_unwritten(
    store: RedisStore, redis_server: RedisServer
) -> None:
    # Between two checks of the guard a Redis emptied (or restarted without its data while
    # this proxy held no connection to it, so that no error told it) looks like a store where
    # nothing happened yet: the claim itself must notice.
    key = RecordKey("agent", "charge-1")
    store.expect_marker((await store.check_marker(None)).marker)
    fence = (await store.claim(claim_request(key))).fence
    assert await store.settle(key, fence, completed())
    other = Redis.from_url(redis_server.url)
    await other.flushall()
    await other.aclose()

    with pytest.raises(StoreUnavailable, match="marker"):
        await store.claim(claim_request(key))

    assert await store.get(key) is None  # nothing was written
    found = await store.check_marker(None)
    assert found.created  # the check finds the store unmarked, as the guard then reports
    store.expect_marker(found.marker)
    assert (await store.claim(claim_request(key))).claimed


async def test_a_restart_from_an_older_snapshot_is_a_loss(
    store: RedisStore, redis_server: RedisServer
) -> None:
    await store.check_marker(None)
    client = Redis.from_url(redis_server.url)
    await client.save()  # the snapshot holds the marker as first checked
    await client.aclose()
    seen = (await store.check_marker((await store.check_marker(None)).marker)).marker
    redis_server.stop()  # no save points: stopping writes no newer snapshot
    redis_server.start()

    found = await store.check_marker(seen)

    assert found.loss is not None
    assert found.loss.kind is LossKind.WENT_BACK
    assert "2 checks where 3 were seen" in found.loss.reason


async def test_every_master_of_a_cluster_is_asked_and_the_marker_works_there(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster.build(tmp_path, replicas=0)
    try:
        cluster.start()
        cluster.wait_ok()
        store = RedisStore.from_url(cluster.url)
        try:
            durable = await store.durability()
            with redis.Redis(port=cluster.ports[1]) as master:
                master.config_set("maxmemory-policy", "allkeys-lru")
            evicting = await store.durability()
            seen = (await store.check_marker(None)).marker
            again = await store.check_marker(seen)
        finally:
            await store.close()
    finally:
        cluster.stop()

    assert (durable.eviction_policy, durable.persistent) == ("noeviction", True)
    assert durable.persistence.count("appendonly yes") == 3
    assert evicting.eviction_policy == "allkeys-lru"
    assert seen is not None
    assert (again.loss, again.marker) == (None, dataclasses.replace(seen, checks=2))
