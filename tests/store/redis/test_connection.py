"""The store's Redis connections: hiredis packs the same bytes, a stalled Redis still times out."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError, TimeoutError

from idemproxy.store.redis.client import clients_from_url
from idemproxy.store.redis.connection import CheaperConnection, CheaperSSLConnection, cheaper
from tests.store.conftest import RedisServer

ARGUMENTS = st.one_of(
    st.text(),
    st.binary(),
    st.binary().map(bytearray),  # not hiredis's: redis-py packs it
    st.integers(),
    st.floats(allow_nan=False),
)
NAMES = st.sampled_from(["EVALSHA", "SET", "SCRIPT LOAD", "CLIENT SETINFO", b"HGETALL", b"X Y"])


def python_packed(*args: Any) -> bytes:
    return b"".join(Connection().pack_command(*args))


def hiredis_packed(*args: Any) -> bytes:
    return b"".join(CheaperConnection().pack_command(*args))


@given(NAMES, st.lists(ARGUMENTS, max_size=30))
def test_every_command_packs_to_the_same_bytes(name: str | bytes, arguments: list[object]) -> None:
    assert hiredis_packed(name, *arguments) == python_packed(name, *arguments)


@pytest.mark.parametrize("bad", [True, None])
def test_an_argument_redis_refuses_is_refused_the_same_way(bad: object) -> None:
    with pytest.raises(DataError) as ours:
        hiredis_packed("SET", "key", bad)
    with pytest.raises(DataError) as theirs:
        python_packed("SET", "key", bad)
    assert str(ours.value) == str(theirs.value)


def test_store_clients_use_the_packing_connections() -> None:
    for url, expected in (
        ("redis://127.0.0.1:6379/0", CheaperConnection),
        ("rediss://127.0.0.1:6380/0", CheaperSSLConnection),
    ):
        client = clients_from_url(url).client
        assert client.connection_pool.connection_class is expected  # type: ignore[union-attr]
    assert cheaper(SSLConnection) is CheaperSSLConnection
    assert cheaper(UnixDomainSocketConnection) is UnixDomainSocketConnection


@pytest.fixture
def stalled(redis_server: RedisServer) -> Iterator[RedisServer]:
    """A Redis that is frozen (SIGSTOP) once the test says so, and thawed after it."""
    yield redis_server
    thaw(redis_server)


def freeze(server: RedisServer) -> None:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)


def thaw(server: RedisServer) -> None:
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGCONT)


def cheaper_client(server: RedisServer, timeout_s: float) -> Redis:
    pool = ConnectionPool(
        connection_class=CheaperConnection, port=server.port, socket_timeout=timeout_s
    )
    return Redis.from_pool(pool)


async def closed(client: Redis) -> None:
    await client.aclose()
    # A connection given up on mid-write closes once its buffer drains into the thawed server.
    await asyncio.sleep(0.5)


async def test_a_small_command_to_a_stalled_redis_times_out(stalled: RedisServer) -> None:
    client = cheaper_client(stalled, timeout_s=0.5)
    assert await client.set("k", "v")  # connected: the next write takes the direct way
    freeze(stalled)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await client.get("k")
    assert time.monotonic() - started < 2
    thaw(stalled)
    await closed(client)


async def test_a_large_write_to_a_stalled_redis_times_out(stalled: RedisServer) -> None:
    client = cheaper_client(stalled, timeout_s=0.5)
    assert await client.set("k", "v")
    freeze(stalled)
    started = time.monotonic()
    # Far more than the socket buffers hold, so the write itself waits on the frozen server.
    with pytest.raises(TimeoutError, match="writing"):
        await client.set("big", b"x" * (64 << 20))
    assert time.monotonic() - started < 2
    thaw(stalled)
    await closed(client)


async def test_a_connection_keeps_its_timeout_after_writing(redis_server: RedisServer) -> None:
    client = cheaper_client(redis_server, timeout_s=0.5)
    for _ in range(3):
        assert await client.set("k", "v")
    connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    assert isinstance(connection, CheaperConnection)
    assert connection.socket_timeout == 0.5
    await client.connection_pool.release(connection)
    await closed(client)
