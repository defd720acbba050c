"""What the Redis store says of its durability, on real redis-servers of each test's own."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import pytest
from redis.asyncio import Redis

from idemproxy.store.redis.store import RedisStore
from tests.store.conftest import RedisServer
from tests.store.redis.test_safety import own_server

pytestmark = pytest.mark.redis


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
