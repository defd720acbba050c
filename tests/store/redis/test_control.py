"""What only the Redis store's agent controls have: one slot, expiry, no round trip of their own."""

from __future__ import annotations

import fakeredis
from redis.crc import key_slot

from idemproxy.store.records import Paused, RecordKey, RecordState, Settlement
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.retention import CONTROL_RETENTION_S
from tests.store.redis.test_records import CountingRedis
from tests.store.test_contract import claim_fence, claim_request, completed
from tests.store.test_control_contract import LIMIT, attempt

AGENT = "agent{with}:braces"


async def paused_store(client: fakeredis.FakeAsyncRedis) -> RedisStore:
    store = RedisStore(client)
    lost = Settlement(RecordState.UNKNOWN, reason="lost")
    for index in range(LIMIT):
        await attempt(store, RecordKey(AGENT, f"e{index}"), lost)
    return store


async def test_an_agents_control_keys_share_its_slot_and_expire() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = await paused_store(client)
    try:
        keys = [layout.control_key(AGENT), layout.streak_key(AGENT), layout.snapshot_key(AGENT)]
        record_slot = key_slot(layout.record_key(RecordKey(AGENT, "e0")).encode())
        for key in keys:
            assert key_slot(key.encode()) == record_slot
            assert 0 < await client.pttl(key) <= CONTROL_RETENTION_S * 1000
    finally:
        await store.close()


async def test_the_pause_check_and_the_count_ride_on_claim_and_settle() -> None:
    client = CountingRedis(server=fakeredis.FakeServer())
    client.commands = []
    store = await paused_store(client)
    try:
        client.commands.clear()
        result = await store.claim(claim_request(RecordKey(AGENT, "new")))
        assert isinstance(result, Paused)
        assert client.commands == ["EVALSHA"]

        key = RecordKey("other", "e1")
        fence = await claim_fence(store, claim_request(key))
        client.commands.clear()
        assert await store.settle(key, fence, completed())
        assert client.commands == ["EVALSHA"]
    finally:
        await store.close()
