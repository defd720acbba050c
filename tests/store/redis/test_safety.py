"""The Redis store's marker across restarts and on a Cluster, on real redis-servers of each
test's own."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from idemproxy.config.settings import StoreSafetyConfig
from idemproxy.metrics import Metrics
from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.records import Claimed, RecordKey
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.safety import LossKind
from idemproxy.storeguard import SafetyStatus, StoreGuard
from tests.store.conftest import RedisServer, free_port
from tests.store.test_contract import claim_fence, claim_request, completed
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
    fence = await claim_fence(store, claim_request(key))
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
    assert isinstance(await store.claim(claim_request(key)), Claimed)


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


async def test_a_claim_after_the_guard_found_the_loss_is_still_refused(
    store: RedisStore, redis_server: RedisServer
) -> None:
    """A request past the guard before the loss (waiting on an attempt in flight, say) claims
    again after the guard's check found the store emptied: that claim must still compare the
    marker the proxy knew, or it takes the key on the empty store and sends the effect twice
    (seen in tests/chaos/test_store_loss.py)."""
    guard = StoreGuard(store, StoreSafetyConfig(), Metrics(CollectorRegistry()))
    await guard.admit()
    key = RecordKey("agent", "charge-1")
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, completed())
    other = Redis.from_url(redis_server.url)
    await other.flushall()
    await other.aclose()

    assert (await guard.check()).status is SafetyStatus.RECORDS_LOST
    with pytest.raises(StoreUnavailable, match="marker"):
        await store.claim(claim_request(key))
    assert await store.get(key) is None
