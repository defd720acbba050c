"""Fixtures for the store tests: every backend behind one ``store`` fixture, and Redis servers."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fakeredis
import pytest
import redis
from redis.asyncio import Redis

from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore

REDIS_URL = "redis://127.0.0.1:6379/0"
SPARE_PORTS = range(6390, 6400)

BACKENDS = [
    "memory",
    "sqlite",
    "fakeredis",
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture
def ns() -> str:
    """A fresh prefix for every agent id a test uses, so tests on a shared Redis never meet."""
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path, ns: str) -> AsyncIterator[Store]:
    """Each backend in turn; the real Redis loses the test's keys afterwards."""
    backend: Store
    if request.param == "memory":
        backend = MemoryStore()
    elif request.param == "sqlite":
        backend = SQLiteStore(tmp_path / "effects.db")
    elif request.param == "fakeredis":
        # A server of its own: no other proxy lists agents there, so none needs a grace.
        server = fakeredis.FakeServer()
        backend = RedisStore(fakeredis.FakeAsyncRedis(server=server), listing_grace_s=0)
    else:
        backend = RedisStore.from_url(REDIS_URL)
    try:
        yield backend
    finally:
        await backend.close()
        if request.param == "redis":
            await delete_keys(REDIS_URL, ns)


async def delete_keys(url: str, ns: str) -> None:
    """Delete every key of every agent whose id starts with ``ns`` (and nothing else)."""
    client = Redis.from_url(url)
    try:
        pattern = f"{layout.PREFIX}:{{{layout.encode_id(ns)}*"
        keys = [key async for key in client.scan_iter(match=pattern, count=500)]
        if keys:
            await client.delete(*keys)
        # The agent registry is one shared key: take out only this test's agents.
        agents = [a async for a, _ in client.zscan_iter(layout.AGENTS_KEY, match=f"{ns}*")]
        if agents:
            await client.zrem(layout.AGENTS_KEY, *agents)
    finally:
        await client.aclose()


def free_port(exclude: Collection[int] = ()) -> int:
    """A loopback port in the spare range that nothing listens on."""
    for port in SPARE_PORTS:
        if port in exclude:
            continue
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    pytest.fail(f"no free port in {SPARE_PORTS}")


@dataclass
class RedisServer:
    """A redis-server of the test's own, on a spare port, that the test may stop and restart."""

    port: int
    workdir: Path
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is not installed"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "no", "--daemonize", "no", "--dir", str(self.workdir)]
        self.process = subprocess.Popen(
            [*args, *self.extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.wait_until_up()

    def wait_until_up(self, timeout_s: float = 10.0) -> None:
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server, stopped at the end of the test whatever state it is left in."""
    server = RedisServer(port=free_port(), workdir=tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
