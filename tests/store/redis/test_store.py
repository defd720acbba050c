"""What only the Redis store has: outages and restarts, Cluster and Sentinel."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.records import Claimed, RecordKey, RecordState, Standing
from idemproxy.store.redis.store import RedisStore
from tests.store.conftest import RedisServer, free_port
from tests.store.test_contract import claim_request, completed, fence_of
from tests.support.cluster import create_cluster


async def test_a_redis_that_is_not_there_is_reported_within_seconds() -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    try:
        for call in (store.ping, lambda: store.claim(claim_request(RecordKey("a", "e")))):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await call()
            assert time.monotonic() - started < 3
    finally:
        await store.close()


@pytest.mark.redis
async def test_the_same_store_works_again_after_redis_restarts(redis_server: RedisServer) -> None:
    store = RedisStore.from_url(redis_server.url)
    try:
        key = RecordKey("agent", "e1")
        assert isinstance(await store.claim(claim_request(key)), Claimed)
        redis_server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.settle(key, await fence_of(store, key), completed())
        assert time.monotonic() - started < 3
        redis_server.start()
        # The restarted server has neither our data nor our scripts; both come back.
        assert isinstance(await store.claim(claim_request(key)), Claimed)
        assert await store.settle(key, await fence_of(store, key), completed())
        record = await store.get(key)
        assert record is not None
        assert record.state is RecordState.COMPLETED
    finally:
        await store.close()


def spare_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        ports.append(free_port(exclude=ports))
    return ports


@pytest.mark.redis
async def test_scripts_run_on_redis_cluster(tmp_path: Path) -> None:
    nodes = []
    for port in spare_ports(3):
        workdir = tmp_path / str(port)
        workdir.mkdir()
        cluster_args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]
        nodes.append(RedisServer(port, workdir, extra_args=cluster_args))
    try:
        for node in nodes:
            node.start()
        create_cluster([node.port for node in nodes])
        url = "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in nodes[:2])
        store = RedisStore.from_url(url)
        try:
            # Agents spread over the nodes; each agent's scripts stay on one of them.
            for i in range(12):
                agent = f"agent-{i}{{:}}"
                key = RecordKey(agent, "e1")
                assert isinstance(await store.claim(claim_request(key)), Claimed)
                assert await store.settle(key, await fence_of(store, key), completed(body=b"\xff"))
                replay = await store.claim(claim_request(key))
                assert isinstance(replay, Standing)
                assert replay.record.state is RecordState.COMPLETED
                assert len(await store.read_events(agent)) == 2
                assert len(await store.batch_records(agent, "batch-1")) == 1
        finally:
            await store.close()
    finally:
        for node in nodes:
            node.stop()


@pytest.fixture
def sentinel_port(redis_server: RedisServer, tmp_path: Path) -> Iterator[int]:
    """A Sentinel watching ``redis_server`` as the master of the service ``effects``."""
    port = free_port(exclude=[redis_server.port])
    config = tmp_path / "sentinel.conf"
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor effects 127.0.0.1 {redis_server.port} 1\n"
    )
    sentinel = subprocess.Popen(
        ["redis-server", str(config), "--sentinel"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        RedisServer(port, tmp_path).wait_until_up()
        yield port
    finally:
        sentinel.terminate()
        sentinel.wait(timeout=10)


@pytest.mark.redis
async def test_sentinel_finds_the_master(redis_server: RedisServer, sentinel_port: int) -> None:
    store = RedisStore.from_url(f"redis+sentinel://127.0.0.1:{sentinel_port}/effects/0")
    key = RecordKey("agent", "e1")
    try:
        assert isinstance(await store.claim(claim_request(key)), Claimed)
        assert await store.settle(key, await fence_of(store, key), completed())
    finally:
        await store.close()
    direct = RedisStore.from_url(redis_server.url)
    try:
        record = await direct.get(key)
        assert record is not None
        assert record.state is RecordState.COMPLETED
    finally:
        await direct.close()
