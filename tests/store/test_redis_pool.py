"""The Redis store under many concurrent requests: more than its pool has connections."""

from __future__ import annotations

import asyncio

import pytest

from idemproxy.store.records import RecordKey
from idemproxy.store.redis_client import POOL_CONNECTIONS
from idemproxy.store.redis_store import RedisStore
from tests.store.conftest import REDIS_URL, delete_keys
from tests.store.test_contract import claim_request, completed

pytestmark = pytest.mark.redis


async def test_more_concurrent_claims_than_pooled_connections_all_succeed(ns: str) -> None:
    store = RedisStore.from_url(REDIS_URL)
    keys = [RecordKey(ns, f"call-{index}") for index in range(POOL_CONNECTIONS * 5)]
    try:
        claims = await asyncio.gather(*(store.claim(claim_request(key)) for key in keys))
        assert all(result.claimed for result in claims)
        settled = await asyncio.gather(
            *(
                store.settle(key, result.fence, completed())
                for key, result in zip(keys, claims, strict=True)
            )
        )
        assert all(settled)
    finally:
        await store.close()
        await delete_keys(REDIS_URL, ns)
