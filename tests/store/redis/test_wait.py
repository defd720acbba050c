"""Claims that wait for replicas, against a real master and replica (and a real Cluster).

The replica's link runs through a forwarder the test cuts: the master then acknowledges writes
the replica never gets, which is what a failover would lose.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis

from idemproxy.store.records import Claimed, RecordKey, RecordState, Standing, Unreplicated
from idemproxy.store.redis.keys import record_key
from idemproxy.store.redis.replicas import ReplicaWait
from idemproxy.store.redis.store import RedisStore
from tests.store.test_contract import claim_request, completed
from tests.support.cluster import LocalCluster
from tests.support.replication import ReplicatedPair, replicated_pair

pytestmark = pytest.mark.redis

WAIT = "wait_replicas=1&wait_timeout_ms=200"
CLUSTER_WAIT_MS = 1000  # the most a store URL allows


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ReplicatedPair]:
    with replicated_pair(tmp_path) as running:
        yield running


@pytest.fixture(params=["pipelined", "pooled"])
async def store(request: pytest.FixtureRequest, pair: ReplicatedPair) -> AsyncIterator[RedisStore]:
    """The single-node store's two ways to its server: the pipelined connection of a
    ``redis://`` URL, and redis-py's pool (what TLS and Sentinel use)."""
    if request.param == "pipelined":
        store = RedisStore.from_url(f"{pair.url}?{WAIT}")
    else:
        store = RedisStore(Redis.from_url(pair.url), replica_wait=ReplicaWait(1, 200))
    try:
        yield store
    finally:
        await store.close()


async def on_replica(pair: ReplicatedPair, key: RecordKey) -> RecordState | None:
    reader = RedisStore.from_url(pair.replica.url)
    try:
        record = await reader.get(key)
    finally:
        await reader.close()
    return None if record is None else record.state


async def test_a_claim_the_replica_has_is_confirmed(
    store: RedisStore, pair: ReplicatedPair
) -> None:
    key = RecordKey("agent", "e1")
    result = await store.claim(claim_request(key))
    assert isinstance(result, Claimed)
    assert result.unreplicated is None
    # WAIT answered once the replica had it: reading it there needs no waiting.
    assert await on_replica(pair, key) is RecordState.IN_FLIGHT


async def test_a_claim_the_replica_lacks_is_held_and_reported(
    store: RedisStore, pair: ReplicatedPair
) -> None:
    pair.link.cut()
    key = RecordKey("agent", "e1")
    result = await store.claim(claim_request(key))
    assert isinstance(result, Claimed)
    assert result.unreplicated == Unreplicated(wanted=1, confirmed=0, timeout_ms=200)
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.IN_FLIGHT  # the proxy releases it (tests/proxy)
    assert await on_replica(pair, key) is None


async def test_a_claim_that_takes_no_key_needs_no_replica(
    store: RedisStore, pair: ReplicatedPair
) -> None:
    key = RecordKey("agent", "e1")
    assert isinstance(await store.claim(claim_request(key)), Claimed)
    assert await store.settle(key, 1, completed())
    pair.link.cut()
    # A replay sends nothing, so it is answered whatever the replicas have.
    replay = await store.claim(claim_request(key))
    assert isinstance(replay, Standing)
    assert replay.record.state is RecordState.COMPLETED


async def test_the_claims_of_one_turn_share_one_wait(pair: ReplicatedPair) -> None:
    store = RedisStore.from_url(f"{pair.url}?{WAIT}")
    admin = redis.Redis(port=pair.master.port)
    try:
        await store.claim(claim_request(RecordKey("agent", "warm")))  # connected, registered
        admin.config_resetstat()
        claims = [store.claim(claim_request(RecordKey("agent", f"e{i}"))) for i in range(20)]
        results = await asyncio.gather(*claims)
        assert all(isinstance(r, Claimed) and r.unreplicated is None for r in results)
        stats = admin.info("commandstats")
        assert stats["cmdstat_wait"]["calls"] == 1
        assert stats["cmdstat_evalsha"]["calls"] == 20
    finally:
        admin.close()
        await store.close()


async def test_waitaof_on_a_server_without_it_refuses_every_claim_and_says_why(
    pair: ReplicatedPair,
) -> None:
    # The test machine's Redis is 7.0, which has no WAITAOF (7.2 and later).
    version = redis.Redis(port=pair.master.port).info("server")["redis_version"]
    if tuple(int(part) for part in version.split(".")[:2]) >= (7, 2):
        pytest.skip(f"Redis {version} has WAITAOF")
    store = RedisStore.from_url(f"{pair.url}?{WAIT}&wait_aof=1")
    try:
        result = await store.claim(claim_request(RecordKey("agent", "e1")))
    finally:
        await store.close()
    assert isinstance(result, Claimed)
    assert result.unreplicated is not None
    assert "unknown command" in result.unreplicated.error
    assert "Redis has since 7.2" in result.unreplicated.error


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster.build(tmp_path, masters=3, replicas=1)
    try:
        cluster.start()
        cluster.wait_ok()
        wait_replicated(cluster)
        yield cluster
    finally:
        cluster.stop()


def wait_replicated(cluster: LocalCluster, timeout_s: float = 30.0) -> None:
    """Until every master has its replica streaming: a cluster serves all its slots before
    the replicas have attached, and a claim that waits for one would not be confirmed."""
    deadline = time.monotonic() + timeout_s
    while True:
        masters = cluster.by_role("master")
        if len(masters) == 3 and all(acknowledged(master.port) for master in masters):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster's replicas are not all streaming after {timeout_s} s")
        time.sleep(0.05)


@pytest.mark.timeout(90)
async def test_on_a_cluster_the_wait_follows_the_slot_wherever_it_moves(
    cluster: LocalCluster,
) -> None:
    # A cluster's replicas, six processes on two loaded cores, can lag a live link past the
    # pair tests' 200 ms: the wait here is long enough that only a frozen replica misses it.
    store = RedisStore.from_url(f"{cluster.url}?wait_replicas=1&wait_timeout_ms={CLUSTER_WAIT_MS}")
    try:
        first = await store.claim(claim_request(RecordKey("agent", "e1")))
        assert isinstance(first, Claimed)
        assert first.unreplicated is None
        # The replica of the agent's slot is frozen: the claim is not confirmed.
        key = RecordKey("agent", "e2")
        master = next(n for n in cluster.by_role("master") if serves(n.port, record_key(key)))
        replica = next(n for n in cluster.nodes if n.port in master.replica_ports())
        replica.signal(signal.SIGSTOP)
        try:
            frozen = await store.claim(claim_request(key))
        finally:
            replica.signal(signal.SIGCONT)
        assert isinstance(frozen, Claimed)
        assert frozen.unreplicated == Unreplicated(1, 0, CLUSTER_WAIT_MS)
        # A coordinated failover moves the slot: the store's slot map is stale, the script
        # is told MOVED (nothing ran), and the pair goes to the new master, whose replica is
        # the old master.
        cluster.fail_over(replica)
        moved = await store.claim(claim_request(RecordKey("agent", "e3")))
        assert isinstance(moved, Claimed)
        assert moved.unreplicated is None
    finally:
        await store.close()


def acknowledged(port: int) -> bool:
    """Whether a replica of the master on ``port`` answers its ``WAIT`` within 100 ms."""
    client = redis.Redis(port=port, socket_timeout=1)
    try:
        found = client.execute_command("WAIT", 1, 100)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    finally:
        client.close()
    return int(found) >= 1


def serves(port: int, key: str) -> bool:
    """Whether the node on ``port`` serves ``key``'s slot: any other answers MOVED."""
    client = redis.Redis(port=port)
    try:
        client.exists(key)
    except redis.ResponseError:
        return False
    finally:
        client.close()
    return True
