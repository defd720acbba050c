"""The contract of a batch's archive of outcomes (store/outcomes.py) on every backend.

A record lives its route's ttl_s once settled; the outcome it leaves in the batch's archive
outlives it, for the archive retention, so the batch can still say what it did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import fakeredis
import pytest

from idemproxy.store.journal import AuditEntry, ClearedRecord, ClearRequest
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
)
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.retention import Retention
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import REDIS_URL, delete_keys
from tests.store.test_contract import SHORT_LEASE_MS, claim_fence, claim_request, completed


async def test_an_outcome_outlives_its_record_in_the_batch_archive(store: Store, ns: str) -> None:
    posted, refused = RecordKey(ns, "posted"), RecordKey(ns, "refused")
    fence = await claim_fence(store, claim_request(posted, ttl_s=1))
    assert await store.settle(posted, fence, completed(ttl_s=1))
    fence = await claim_fence(store, claim_request(refused, ttl_s=1))
    assert await store.settle(refused, fence, completed(status=403, body=b"no", ttl_s=1))

    await asyncio.sleep(1.2)

    assert await store.get(posted) is None
    assert await store.batch_records(ns, "batch-1") == []
    outcomes = await store.read_outcomes(ns, "batch-1")
    assert [(o.effect_id, o.state, o.status) for o in outcomes] == [
        ("posted", RecordState.COMPLETED, 200),
        ("refused", RecordState.COMPLETED, 403),
    ]
    first = outcomes[0]
    assert (first.batch, first.tool_call, first.external_id, first.attempts) == (
        "batch-1",
        "call-posted",
        "m1",
        1,
    )
    assert (first.upstream, first.method, first.action) == ("discord", "POST", "discord_reply")
    assert 0 < first.created_ms <= first.updated_ms
    assert await store.read_outcomes(ns, "batch-2") == []


async def test_held_records_leave_no_outcome_and_a_later_one_replaces_the_first(
    store: Store, ns: str
) -> None:
    key, flying = RecordKey(ns, "k"), RecordKey(ns, "flying")
    await claim_fence(store, claim_request(flying))
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, Settlement(RecordState.UNKNOWN, reason="cut"))
    assert await store.read_outcomes(ns, "batch-1") == []  # unknown and in flight never expire

    verdict = Resolution(RecordState.NOT_APPLIED, reason="checked: not sent")
    resolved = await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, verdict))
    assert isinstance(resolved, Resolved)
    [outcome] = await store.read_outcomes(ns, "batch-1")
    assert (outcome.state, outcome.reason, outcome.status) == (
        RecordState.NOT_APPLIED,
        "checked: not sent",
        0,
    )

    fence = await claim_fence(store, claim_request(key))  # a freed key, taken again
    assert await store.settle(key, fence, completed())
    [outcome] = await store.read_outcomes(ns, "batch-1")
    assert (outcome.state, outcome.attempts) == (RecordState.COMPLETED, 2)


async def test_a_cleared_record_leaves_the_archive_with_it(store: Store, ns: str) -> None:
    freed, done = RecordKey(ns, "freed"), RecordKey(ns, "done")
    freed_fence = await claim_fence(store, claim_request(freed))
    assert await store.settle(freed, freed_fence, Settlement(RecordState.NOT_APPLIED))
    fence = await claim_fence(store, claim_request(done))
    assert await store.settle(done, fence, completed())
    audit = AuditEntry(agent=ns, action="restart", actor="alice", target="batch-1")

    cleared = await store.clear_batch(
        ClearRequest(ns, "batch-1", [ClearedRecord("freed", freed_fence)], None, audit)
    )

    assert cleared == ["freed"]
    assert [o.effect_id for o in await store.read_outcomes(ns, "batch-1")] == ["done"]


@pytest.fixture(
    params=["memory", "sqlite", "fakeredis", pytest.param("redis", marks=pytest.mark.redis)]
)
async def short_archive(
    request: pytest.FixtureRequest, tmp_path: Path, ns: str
) -> AsyncIterator[Store]:
    """Each backend, keeping archives one second."""
    retention = Retention(archive_s=1)
    backend: Store
    if request.param == "memory":
        backend = MemoryStore(retention=retention)
    elif request.param == "sqlite":
        backend = SQLiteStore(tmp_path / "effects.db", retention=retention)
    elif request.param == "fakeredis":
        client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
        backend = RedisStore(client, retention=retention, listing_grace_s=0)
    else:
        backend = RedisStore.from_url(REDIS_URL, retention=retention)
    try:
        yield backend
    finally:
        await backend.close()
        if request.param == "redis":
            await delete_keys(REDIS_URL, ns)


async def test_the_archive_is_kept_the_archive_retention(short_archive: Store, ns: str) -> None:
    store = short_archive
    assert store.retention.archive_s == 1
    key = RecordKey(ns, "k")
    fence = await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))
    assert await store.settle(key, fence, completed(ttl_s=1))
    assert [o.effect_id for o in await store.read_outcomes(ns, "batch-1")] == ["k"]

    await asyncio.sleep(1.2)

    assert await store.read_outcomes(ns, "batch-1") == []
