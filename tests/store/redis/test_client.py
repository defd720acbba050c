"""The Redis store under many concurrent requests: more than its pool has connections."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.records import Claimed, RecordKey
from idemproxy.store.redis.client import POOL_CONNECTIONS, BoundedPool, client_options
from idemproxy.store.redis.store import RedisStore
from tests.store.conftest import REDIS_URL, RedisServer, delete_keys
from tests.store.test_contract import claim_request, completed

pytestmark = pytest.mark.redis


async def test_more_concurrent_claims_than_pooled_connections_all_succeed(ns: str) -> None:
    store = RedisStore.from_url(REDIS_URL)
    keys = [RecordKey(ns, f"call-{index}") for index in range(POOL_CONNECTIONS * 5)]
    try:
        claims = await asyncio.gather(*(store.claim(claim_request(key)) for key in keys))
        assert all(isinstance(result, Claimed) for result in claims)
        settled = await asyncio.gather(
            *(
                store.settle(key, result.fence, completed())
                for key, result in zip(keys, claims, strict=True)
                if isinstance(result, Claimed)
            )
        )
        assert all(settled)
    finally:
        await store.close()
        await delete_keys(REDIS_URL, ns)


async def test_commands_that_fail_to_connect_do_not_widen_the_pool(
    redis_server: RedisServer, ns: str
) -> None:
    pool = BoundedPool.from_url(redis_server.url, max_connections=5, **client_options())
    store = RedisStore(Redis.from_pool(pool))
    try:
        redis_server.stop()
        failed = await asyncio.gather(
            *(store.claim(claim_request(RecordKey(ns, f"down-{i}"))) for i in range(20)),
            return_exceptions=True,
        )
        assert all(isinstance(result, StoreUnavailable) for result in failed)
        redis_server.start()
        # Were each failed connect to give back a slot it never held, 25 commands could now
        # run at once against 5 connections and fail as "Too many connections".
        keys = [RecordKey(ns, f"up-{i}") for i in range(50)]
        claims = await asyncio.gather(*(store.claim(claim_request(key)) for key in keys))
        assert all(isinstance(result, Claimed) for result in claims)
    finally:
        await store.close()
