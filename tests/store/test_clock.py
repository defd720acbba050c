"""One clock per store, and one that a step of the wall clock does not move.

The stores that keep time themselves (memory, SQLite) decide leases and TTLs by it; the proxy
asks the store for its time wherever it compares with a time the store wrote (a native key's
dedupe window), so a proxy host whose clock differs from Redis's decides nothing wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordKey, RecordState, Standing
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import REDIS_URL, delete_keys
from tests.store.test_contract import claim_fence, claim_request, completed

HOUR_NS = 3600 * 10**9


@pytest.fixture(params=["memory", "sqlite"])
async def own_clock_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    store: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "e.db")
    await store.ping()  # SQLite reads its clock's anchor when it opens the file
    yield store
    await store.close()


def step_wall_clock(monkeypatch: pytest.MonkeyPatch, by_ns: int) -> None:
    wall = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: wall() + by_ns)
    monkeypatch.setattr(time, "time", lambda: (wall() + by_ns) / 10**9)


async def test_a_wall_clock_step_forward_lapses_no_lease(
    own_clock_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = RecordKey("agent", "e1")
    fence = await claim_fence(own_clock_store, claim_request(key, lease_ms=30_000))
    step_wall_clock(monkeypatch, HOUR_NS)
    assert await own_clock_store.sweep_expired("agent") == []
    seen = await own_clock_store.claim(claim_request(key))
    assert isinstance(seen, Standing)
    assert seen.record.state is RecordState.IN_FLIGHT
    assert await own_clock_store.settle(key, fence, completed())


async def test_a_wall_clock_step_back_keeps_no_record_past_its_ttl(
    own_clock_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = RecordKey("agent", "e1")
    fence = await claim_fence(own_clock_store, claim_request(key))
    assert await own_clock_store.settle(key, fence, completed(ttl_s=1))
    step_wall_clock(monkeypatch, -HOUR_NS)
    await asyncio.sleep(1.1)
    assert await own_clock_store.get(key) is None


@pytest.mark.redis
async def test_the_store_tells_its_own_time(monkeypatch: pytest.MonkeyPatch, ns: str) -> None:
    # Redis's clock, not the proxy host's: this host's clock runs an hour ahead.
    store = RedisStore.from_url(REDIS_URL)
    try:
        key = RecordKey(ns, "e1")
        await store.claim(claim_request(key))
        step_wall_clock(monkeypatch, HOUR_NS)
        record = await store.get(key)
        assert record is not None
        now_ms = await store.now_ms()
        assert 0 <= now_ms - record.created_ms < 5_000
    finally:
        await store.close()
        await delete_keys(REDIS_URL, ns)
