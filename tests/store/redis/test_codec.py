"""A record that cannot be decoded is reported corrupt, never read as another state."""

from __future__ import annotations

import fakeredis
import pytest

from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import RecordKey
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from tests.store.test_contract import claim_request


async def test_an_undecodable_record_is_reported_corrupt() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = RedisStore(client)
    key = RecordKey("agent", "e1")
    try:
        await store.claim(claim_request(key))
        await client.hset(layout.record_key(key), "state", "half-done")
        with pytest.raises(StoreCorrupt):
            await store.get(key)
        with pytest.raises(StoreCorrupt):
            await store.claim(claim_request(key, fingerprint="other"))
    finally:
        await store.close()
