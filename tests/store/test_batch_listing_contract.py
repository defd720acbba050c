"""The listing of an agent's batches (Control.list_batches, store/batches.py) every backend
keeps: newest first by when each started, bounded, the agent's own, gone with its records and
never missing a batch whose outcome is in doubt.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
"""

from __future__ import annotations

import asyncio

from idemproxy.store.batches import MAX_LISTED_BATCHES, BatchStart
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordKey, RecordState, Settlement
from tests.store.test_contract import claim_fence, claim_request, completed


async def claim_in(store: Store, key: RecordKey, batch: str, ttl_s: int = 600) -> int:
    return await claim_fence(store, claim_request(key, batch=batch, ttl_s=ttl_s))


async def listed(store: Store, agent: str, limit: int = 100) -> list[str]:
    return [start.batch for start in await store.list_batches(agent, limit)]


async def test_batches_are_listed_newest_first(store: Store, ns: str) -> None:
    for name in ("b-old", "b-mid", "b-new"):
        await claim_in(store, RecordKey(ns, f"{name}-e1"), name)
        await asyncio.sleep(0.005)
    # A later claim in an old batch does not move it: a batch is listed by when it started.
    await claim_in(store, RecordKey(ns, "b-old-e2"), "b-old")
    assert await listed(store, ns) == ["b-new", "b-mid", "b-old"]
    starts = await store.list_batches(ns)
    assert starts[0].started_ms >= starts[1].started_ms >= starts[2].started_ms
    first = await store.get(RecordKey(ns, "b-old-e1"))
    assert first is not None
    assert starts[2] == BatchStart("b-old", first.created_ms)


async def test_the_limit_keeps_the_newest(store: Store, ns: str) -> None:
    for i in range(4):
        await claim_in(store, RecordKey(ns, f"e{i}"), f"batch-{i}")
        await asyncio.sleep(0.005)
    assert await listed(store, ns, limit=2) == ["batch-3", "batch-2"]
    assert await listed(store, ns, limit=0) == []
    assert len(await store.list_batches(ns, limit=MAX_LISTED_BATCHES + 5)) == 4


async def test_only_the_agents_own_batches_and_none_without_an_id(store: Store, ns: str) -> None:
    await claim_in(store, RecordKey(ns, "mine"), "batch-a")
    await claim_in(store, RecordKey(ns, "no batch"), "")
    await claim_in(store, RecordKey(f"{ns}-other", "theirs"), "batch-b")
    assert await listed(store, ns) == ["batch-a"]
    assert await listed(store, f"{ns}-other") == ["batch-b"]
    assert await store.list_batches(f"{ns}-nobody") == []


async def test_every_state_keeps_its_batch_listed(store: Store, ns: str) -> None:
    states = {"done": completed(), "freed": Settlement(RecordState.NOT_APPLIED)}
    states["doubt"] = Settlement(RecordState.UNKNOWN)
    for name, settlement in states.items():
        key = RecordKey(ns, name)
        assert await store.settle(key, await claim_in(store, key, name), settlement)
    await claim_in(store, RecordKey(ns, "flying"), "flying")
    assert sorted(await listed(store, ns)) == ["done", "doubt", "flying", "freed"]


async def test_a_batch_goes_with_its_last_record(store: Store, ns: str) -> None:
    short, long = RecordKey(ns, "short"), RecordKey(ns, "long")
    assert await store.settle(short, await claim_in(store, short, "gone", 1), completed(ttl_s=1))
    assert await store.settle(long, await claim_in(store, long, "kept", 1), completed(ttl_s=600))
    # Kept past the claim's TTL by the outcome's: the batch is listed as long as its record.
    await asyncio.sleep(2.3)
    assert await listed(store, ns) == ["kept"]


async def test_a_batch_in_doubt_outlives_every_ttl(store: Store, ns: str) -> None:
    """An unknown or in-flight record has no expiry, so neither has its batch's listing."""
    doubt, flying = RecordKey(ns, "doubt"), RecordKey(ns, "flying")
    fence = await claim_in(store, doubt, "in-doubt", 1)
    assert await store.settle(doubt, fence, Settlement(RecordState.UNKNOWN, ttl_s=1))
    await claim_in(store, flying, "in-flight", 1)
    await asyncio.sleep(2.3)
    assert sorted(await listed(store, ns)) == ["in-doubt", "in-flight"]
    record = await store.get(doubt)
    assert record is not None
    assert BatchStart("in-doubt", record.created_ms) in await store.list_batches(ns)


async def test_a_freed_key_claimed_again_brings_its_start_along(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_in(store, key, "first")
    assert await store.settle(key, fence, Settlement(RecordState.NOT_APPLIED))
    await asyncio.sleep(0.005)
    await claim_in(store, RecordKey(ns, "e2"), "second")
    await asyncio.sleep(0.005)
    await claim_fence(store, claim_request(key, batch="second"))
    record = await store.get(key)
    assert record is not None
    starts = await store.list_batches(ns)
    assert BatchStart("second", record.created_ms) in starts
