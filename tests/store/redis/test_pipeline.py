"""The pipelined connection of the store's hot path, against real redis-servers.

Each test checks what a proxy relies on: every caller gets its own reply however many share the
connection, errors arrive as redis-py's classes, and a stuck, dead or restarted Redis is
reported quickly and then used again without a restart.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis
from redis.exceptions import (
    AuthenticationError,
    ConnectionError,
    NoScriptError,
    ResponseError,
    TimeoutError,
)

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.records import Claimed, ClaimRequest, EffectMeta, RecordKey
from idemproxy.store.redis.client import clients_from_url
from idemproxy.store.redis.pipeline import PipelinedRedis, PipelinedScript
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.redis.wire import Endpoint
from tests.store.conftest import RedisServer, free_port
from tests.store.redis.test_connection import freeze, stalled, thaw

__all__ = ["stalled"]  # the fixture, imported to be used here

pytestmark = pytest.mark.redis


def pipeline(port: int, reply_timeout_s: float = 2.0, **endpoint: object) -> PipelinedRedis:
    return PipelinedRedis(
        Endpoint(port=port, **endpoint),  # type: ignore[arg-type]
        connect_timeout_s=1.0,
        reply_timeout_s=reply_timeout_s,
    )


async def test_each_of_many_concurrent_callers_gets_its_own_reply(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    keys = [f"k{i}" for i in range(500)]
    await asyncio.gather(*(redis.execute("SET", key, key.upper()) for key in keys))
    replies = await asyncio.gather(*(redis.execute("GET", key) for key in keys))
    assert replies == [key.upper().encode() for key in keys]
    await redis.close()


async def test_an_error_reply_is_raised_and_the_connection_goes_on(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    await redis.execute("SET", "text", "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await redis.execute("LPUSH", "text", "y")
    with pytest.raises(NoScriptError):
        await redis.execute("EVALSHA", "0" * 40, 0)
    assert await redis.execute("GET", "text") == b"x"
    await redis.close()


async def test_a_cancelled_caller_does_not_shift_the_replies_of_the_others(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    await redis.execute("SET", "a", "1")
    # The first command holds the connection for 0.3 s (a blocking pop on an empty list); its
    # caller gives up while the reply is still to come, and the GET queued behind it waits.
    slow = asyncio.ensure_future(redis.execute("BLPOP", "empty", "0.3"))
    await asyncio.sleep(0.05)
    behind = asyncio.ensure_future(redis.execute("GET", "a"))
    await asyncio.sleep(0.05)
    slow.cancel()
    assert await behind == b"1"
    assert slow.cancelled()
    assert await redis.execute("GET", "a") == b"1"
    await redis.close()


async def test_a_script_is_loaded_again_after_redis_forgot_it(redis_server: RedisServer) -> None:
    redis = pipeline(redis_server.port)
    script = PipelinedScript(redis, "return {KEYS[1], ARGV[1]}")
    assert await script(keys=["k"], args=["v"]) == [b"k", b"v"]
    await redis.execute("SCRIPT", "FLUSH")
    assert await script(keys=["k"], args=[2]) == [b"k", b"2"]
    await redis.close()


async def test_auth_and_database_come_from_the_url(redis_server: RedisServer) -> None:
    admin = Redis(port=redis_server.port)
    await admin.acl_setuser(
        "agent", enabled=True, passwords=["+s3cret"], keys="*", commands=["+@all"]
    )
    url = f"redis://agent:s3cret@127.0.0.1:{redis_server.port}/2"
    redis = clients_from_url(url).pipeline
    assert redis is not None
    await redis.execute("SET", "where", "db2")
    reader = Redis(port=redis_server.port, db=2)
    assert await reader.get("where") == b"db2"
    await reader.aclose()
    await redis.close()
    wrong = clients_from_url(f"redis://agent:wrong@127.0.0.1:{redis_server.port}/0").pipeline
    assert wrong is not None
    with pytest.raises(AuthenticationError):
        await wrong.execute("PING")
    await admin.aclose()


def test_tls_urls_have_no_pipeline() -> None:
    assert clients_from_url("rediss://127.0.0.1:6380/0").pipeline is None
    assert clients_from_url("redis+cluster://127.0.0.1:7000").pipeline is None
    assert clients_from_url("redis://127.0.0.1:6379/0").pipeline is not None


async def test_a_stuck_redis_fails_every_waiting_call_in_time(stalled: RedisServer) -> None:
    redis = pipeline(stalled.port, reply_timeout_s=0.5)
    await redis.execute("PING")
    freeze(stalled)
    started = time.monotonic()
    calls = [redis.execute("INCR", "n") for _ in range(20)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(outcome, TimeoutError) for outcome in outcomes)
    assert time.monotonic() - started < 1.5
    thaw(stalled)
    # The stuck connection was dropped: the next call connects anew and works.
    assert await redis.execute("PING") == b"PONG"
    await redis.close()


async def test_a_restarted_redis_is_used_again_without_a_restart(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    await redis.execute("PING")
    redis_server.stop()
    with pytest.raises(ConnectionError):
        await redis.execute("PING")
    redis_server.start()
    assert await redis.execute("PING") == b"PONG"
    await redis.close()


async def test_a_redis_that_is_not_there_is_reported_at_once() -> None:
    redis = pipeline(free_port())
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="Error connecting"):
        await redis.execute("PING")
    assert time.monotonic() - started < 1


async def test_the_store_reports_a_dead_pipeline_as_unavailable(
    redis_server: RedisServer,
) -> None:
    store = RedisStore.from_url(redis_server.url)
    await store.ping()
    redis_server.stop()
    with pytest.raises(StoreUnavailable):
        await store.ping()
    await store.close()


async def test_the_store_runs_its_hot_path_on_one_connection(redis_server: RedisServer) -> None:
    store = RedisStore.from_url(redis_server.url)
    meta = EffectMeta("b", "t", "", "up", "POST", "/x")
    claims = [
        ClaimRequest(RecordKey("agent", f"e{i}"), "fp", meta, lease_ms=30_000, ttl_s=60)
        for i in range(50)
    ]
    results = await asyncio.gather(*(store.claim(claim) for claim in claims))
    assert all(isinstance(result, Claimed) for result in results)
    admin = Redis(port=redis_server.port, decode_responses=True)
    scripted = [c for c in await admin.client_list() if c["cmd"] in ("evalsha", "eval")]
    # redis-py would have lent the 50 concurrent claims several pooled connections.
    assert len(scripted) == 1
    await admin.aclose()
    await store.close()


async def test_one_trailer_follows_the_commands_of_a_turn_and_answers_each(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    await redis.execute("PING")  # connected: the calls below all go out in one loop turn
    calls = [redis.execute_then(("INCR", "trailers"), "SET", f"k{i}", i) for i in range(10)]
    answers = await asyncio.gather(*calls)
    # Ten commands of one loop turn, then the trailer once: each caller has its reply.
    assert answers == [(b"OK", 1)] * 10
    assert await redis.execute("GET", "trailers") == b"1"
    assert await redis.execute_then(("INCR", "trailers"), "GET", "k3") == (b"3", 2)
    await redis.close()


async def test_a_trailer_that_fails_is_returned_and_the_command_still_counts(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port, reply_timeout_s=0.3)
    # The trailer blocks past the reply timeout: the command's reply came, the trailer's not.
    reply, trailed = await redis.execute_then(("BLPOP", "empty", "1"), "SET", "k", "v")
    assert reply == b"OK"
    assert isinstance(trailed, TimeoutError)
    reply, trailed = await redis.execute_then(("LPUSH", "k", "x"), "GET", "k")
    assert reply == b"v"
    assert isinstance(trailed, ResponseError)  # an error reply, as a value too
    await redis.close()


async def test_a_caller_cancelled_does_not_cancel_the_trailer_it_shares(
    redis_server: RedisServer,
) -> None:
    redis = pipeline(redis_server.port)
    trailer = ("BLPOP", "empty", "0.3")
    gone = asyncio.ensure_future(redis.execute_then(trailer, "PING"))
    stays = asyncio.ensure_future(redis.execute_then(trailer, "PING"))
    await asyncio.sleep(0.1)  # both have their PONG and wait on the one BLPOP
    gone.cancel()
    assert await stays == (b"PONG", None)
    assert gone.cancelled()
    await redis.close()
