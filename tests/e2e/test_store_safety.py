"""`idemproxy serve` on a Redis that loses records (one that evicts, one restarted empty) and
on one without the persistence the deployment requires.

Each test runs a redis-server of its own, so that it may reconfigure, fill and restart it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import redis

from tests.support.processes import FakeUpstream, RedisServer, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

CHARGE = {"Idem-Batch": "batch-1", "Idem-Tool-Call": "charge-1"}
# A loss is looked for this often, so a test waits a fraction of a second for it, not seconds.
FAST_CHECKS = {"IDEMPROXY_STORE_SAFETY__CHECK_INTERVAL_S": "0.2"}
DETECTION_S = 10.0
EVICTING = ["--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"]
FILLER_BYTES = 10_000

Answer = tuple[int, dict[str, str], bytes]


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("name: e2e\nroutes: []\ndefault: {name: charge}\n")
    return path


def proxy_on(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, policy: Path, **env: str
) -> ServedProxy:
    return ServedProxy.for_upstream(
        tmp_path, f"{upstream.url}/api", policy, redis_server.url, {**FAST_CHECKS, **env}
    )


async def post(
    session: aiohttp.ClientSession, proxy: ServedProxy, headers: dict[str, str], body: bytes
) -> Answer:
    async with session.post(f"{proxy.url}/up/messages", data=body, headers=headers) as response:
        return response.status, dict(response.headers), await response.read()


async def fill(session: aiohttp.ClientSession, proxy: ServedProxy, effects: int) -> None:
    """Other tool calls' effects, each recording some 20 kB (its body and the echo)."""
    body = orjson.dumps({"text": "x" * FILLER_BYTES})
    gate = asyncio.Semaphore(16)

    async def one(number: int) -> None:
        async with gate:
            await post(session, proxy, {"Idem-Batch": "fill", "Idem-Tool-Call": f"f{number}"}, body)

    await asyncio.gather(*(one(number) for number in range(effects)))


def readiness(proxy: ServedProxy) -> tuple[int, dict[str, Any]]:
    status, body = http_get(f"{proxy.admin_url}/readyz")
    document: dict[str, Any] = orjson.loads(body)
    return status, document


async def wait_readiness(proxy: ServedProxy, status: int) -> dict[str, Any]:
    """/readyz once it answers ``status``, or its last answer after DETECTION_S."""
    deadline = time.monotonic() + DETECTION_S
    while True:
        answered, document = readiness(proxy)
        if answered == status or time.monotonic() > deadline:
            return document
        await asyncio.sleep(0.05)


def problem_code(answer: Answer) -> str:
    document: dict[str, Any] = orjson.loads(answer[2])
    return str(document["type"]).rpartition("/")[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("idemproxy")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def charges(upstream: FakeUpstream) -> list[dict[str, Any]]:
    return [effect for effect in upstream.effects("/messages") if "amount" in effect["body"]]


@pytest.fixture
def evicting_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.args += EVICTING
    with running(server):
        yield server


async def test_an_evicting_redis_never_lets_a_charge_through_twice(
    tmp_path: Path,
    upstream: FakeUpstream,
    evicting_redis: RedisServer,
    policy: Path,
    session: aiohttp.ClientSession,
) -> None:
    proxy = proxy_on(tmp_path, upstream, evicting_redis, policy)
    with running(proxy):
        first = await post(session, proxy, CHARGE, b'{"amount": 100}')
        await post(session, proxy, CHARGE, b'{"amount": 100}')
        await fill(session, proxy, 300)
        repeat = await post(session, proxy, CHARGE, b'{"amount": 100}')
        status, document = readiness(proxy)
        log = proxy.output()

    assert len(charges(upstream)) <= 1
    assert (first[0], problem_code(first)) == (503, "store-unsafe")  # refused from the start
    assert upstream.effects() == []
    assert repeat[0] == 503
    assert problem_code(repeat) == "store-unsafe"
    assert repeat[1]["Idem-Outcome"] == "store-unsafe"
    assert status == 503
    assert document["status"] == "unsafe"
    assert "CONFIG SET maxmemory-policy noeviction" in document["reason"]
    # Said at start-up, before anything was asked of the proxy.
    assert "volatile-lru" in log
    assert "CONFIG SET maxmemory-policy noeviction" in log


def record_keys(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter(match="idem:*:r:*", count=1000))


def evict_every_record(client: redis.Redis) -> None:
    """Another application's cache fills the server until Redis has evicted every record."""
    for round_ in range(100):
        with client.pipeline(transaction=False) as pipe:
            for number in range(100):
                pipe.set(f"cache:{round_}:{number}", b"x" * FILLER_BYTES, ex=3600)
            pipe.execute()
        if not record_keys(client):
            return
    pytest.fail("Redis kept the records: nothing was evicted")


async def test_records_evicted_under_a_running_proxy_fail_closed_until_acknowledged(
    tmp_path: Path, upstream: FakeUpstream, policy: Path, session: aiohttp.ClientSession
) -> None:
    server = RedisServer(tmp_path)
    with running(server):
        client = redis.Redis(port=server.port)
        proxy = proxy_on(tmp_path, upstream, server, policy)
        with running(proxy), client:
            first = await post(session, proxy, CHARGE, b'{"amount": 100}')
            replay = await post(session, proxy, CHARGE, b'{"amount": 100}')
            # An operator gives the Redis a memory limit and a managed service's default policy.
            client.config_set("maxmemory", "3mb")
            client.config_set("maxmemory-policy", "volatile-lru")
            evict_every_record(client)
            document = await wait_readiness(proxy, 503)
            repeat = await post(session, proxy, CHARGE, b'{"amount": 100}')
            # Fixing the policy does not bring back what was evicted: still refused.
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", "0")
            after_fix = await wait_readiness(proxy, 503)
            refused = await post(session, proxy, {**CHARGE, "Idem-Tool-Call": "charge-2"}, b"{}")
            acknowledged = cli(
                "store", "acknowledge-loss", "--admin-url", proxy.admin_url,
                "--note", "a cache evicted them; charges checked at the upstream",
            )  # fmt: skip
            flowing = await post(session, proxy, {**CHARGE, "Idem-Tool-Call": "charge-3"}, b"{}")
            status_after, _ = readiness(proxy)

    assert (first[0], replay[1]["Idem-Outcome"]) == (200, "replayed")
    assert len(charges(upstream)) == 1
    assert (repeat[0], problem_code(repeat)) == (503, "store-records-lost")
    assert document["status"] == "records-lost"
    assert "evicted" in document["reason"]
    assert after_fix["status"] == "records-lost"
    assert (refused[0], problem_code(refused)) == (503, "store-records-lost")
    assert acknowledged.returncode == 0, acknowledged.stderr
    assert (flowing[0], flowing[1]["Idem-Outcome"]) == (200, "forwarded")
    assert status_after == 200


async def test_a_redis_restarted_empty_under_a_running_proxy_fails_closed(
    tmp_path: Path, upstream: FakeUpstream, policy: Path, session: aiohttp.ClientSession
) -> None:
    server = RedisServer(tmp_path)  # keeps nothing on disk
    with running(server):
        proxy = proxy_on(tmp_path, upstream, server, policy)
        with running(proxy):
            ready_before = readiness(proxy)
            await post(session, proxy, CHARGE, b'{"amount": 100}')
            replay = await post(session, proxy, CHARGE, b'{"amount": 100}')
            server.stop()
            server.start()
            document = await wait_readiness(proxy, 503)
            repeat = await post(session, proxy, CHARGE, b'{"amount": 100}')
            shown = cli("store", "status", "--admin-url", proxy.admin_url, "--json")
            acknowledged = cli(
                "store", "acknowledge-loss", "--admin-url", proxy.admin_url,
                "--actor", "alice", "--note", "redis restarted; charges checked at the upstream",
            )  # fmt: skip
            flowing = await post(session, proxy, {**CHARGE, "Idem-Tool-Call": "charge-2"}, b"{}")
            ready_after = readiness(proxy)
            log = cli("store", "status", "--store", server.url, "--json")

    assert replay[1]["Idem-Outcome"] == "replayed"
    assert len(charges(upstream)) == 1
    # Persistence off is only a warning by default (store_safety.require_persistence).
    assert ready_before[0] == 200
    assert any("appendonly yes" in warning for warning in ready_before[1]["warnings"])
    assert (repeat[0], problem_code(repeat)) == (503, "store-records-lost")
    assert repeat[1]["x-should-retry"] == "false"
    assert document["status"] == "records-lost"
    assert "idemproxy store acknowledge-loss" in document["reason"]
    assert shown.returncode == 1, shown.stderr  # `store status` of a store not ready
    assert orjson.loads(shown.stdout)["loss"] is not None
    assert acknowledged.returncode == 0, acknowledged.stderr
    assert (flowing[0], flowing[1]["Idem-Outcome"]) == (200, "forwarded")
    assert ready_after[0] == 200
    entries = orjson.loads(log.stdout)["log"]
    assert [entry["action"] for entry in entries][-2:] == [
        "store.loss_detected",
        "store.loss_acknowledged",
    ]
    assert entries[-1]["actor"].startswith("alice")
    assert entries[-1]["note"] == "redis restarted; charges checked at the upstream"


async def test_a_deployment_that_requires_persistence_is_not_ready_without_it(
    tmp_path: Path, upstream: FakeUpstream, policy: Path, session: aiohttp.ClientSession
) -> None:
    server = RedisServer(tmp_path)
    with running(server):
        required = {"IDEMPROXY_STORE_SAFETY__REQUIRE_PERSISTENCE": "true"}
        proxy = proxy_on(tmp_path, upstream, server, policy, **required)
        with running(proxy):
            status, document = readiness(proxy)
            refused = await post(session, proxy, CHARGE, b'{"amount": 100}')
            with redis.Redis(port=server.port) as client:
                client.config_set("appendonly", "yes")
            await wait_readiness(proxy, 200)
            charged = await post(session, proxy, CHARGE, b'{"amount": 100}')
        log = proxy.output()

    assert (status, document["status"]) == (503, "unsafe")
    assert "appendonly yes" in document["reason"]
    assert (refused[0], problem_code(refused)) == (503, "store-unsafe")
    assert "appendonly yes" in log
    assert (charged[0], charged[1]["Idem-Outcome"]) == (200, "forwarded")
    assert len(charges(upstream)) == 1
