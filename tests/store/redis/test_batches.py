"""What only the Redis store's batch listing has: its index (``idem:{A}:batches``), capped and
kept long, from which a listing drops the batches whose records are gone."""

from __future__ import annotations

import fakeredis
import pytest

from idemproxy.store import batches
from idemproxy.store.records import RecordKey
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from tests.store.test_contract import claim_fence, claim_request, completed


@pytest.fixture
def client() -> fakeredis.FakeAsyncRedis:
    return fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())


async def test_a_batch_whose_set_is_gone_leaves_the_index(
    client: fakeredis.FakeAsyncRedis,
) -> None:
    store = RedisStore(client, listing_grace_s=0)
    for batch in ("kept", "gone"):
        key = RecordKey("agent", batch)
        assert await store.settle(
            key, await claim_fence(store, claim_request(key, batch=batch)), completed()
        )
    await client.delete(layout.batch_key("agent", "gone"))  # as its TTL would
    assert [start.batch for start in await store.list_batches("agent")] == ["kept"]
    assert await client.zrange(layout.batches_key("agent"), 0, -1) == [b"kept"]


async def test_the_index_keeps_the_newest_batches_and_lives_long(
    client: fakeredis.FakeAsyncRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cap reaches the claim script through its arguments, read when the claim is built.
    monkeypatch.setattr("idemproxy.store.redis.records.MAX_LISTED_BATCHES", 2)
    store = RedisStore(client, listing_grace_s=0)
    for i in range(3):
        await claim_fence(store, claim_request(RecordKey("agent", f"e{i}"), batch=f"b{i}"))
    index = layout.batches_key("agent")
    assert set(await client.zrange(index, 0, -1)) == {b"b1", b"b2"}
    assert await client.pttl(index) > batches.LISTING_RETENTION_S * 1000 - 60_000
