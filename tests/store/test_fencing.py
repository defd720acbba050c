"""Fencing across takeovers, on every backend: only the newest attempt's writes ever land.

The contract suite checks one stale settle at a time. Here an effect changes hands several
times (lease expiry, review, a new attempt), and every attempt that ever held it tries to write
at once, as slow proxies waking up together would.
"""

from __future__ import annotations

import asyncio

from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    EventType,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
    Standing,
)
from tests.store.test_contract import SHORT_LEASE_MS, claim_fence, claim_request, completed

TAKEOVERS = 3


async def hand_over(store: Store, key: RecordKey) -> int:
    """Let the holder's lease lapse, turn the key unknown, free it, and claim it again."""
    await asyncio.sleep(SHORT_LEASE_MS / 1000 + 0.05)
    seen = await store.claim(claim_request(key, lease_ms=SHORT_LEASE_MS))
    assert isinstance(seen, Standing)
    assert seen.record.state is RecordState.UNKNOWN
    verdict = Resolution(RecordState.NOT_APPLIED, reason="operator: not there")
    assert isinstance(
        await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, verdict)), Resolved
    )
    taken = await store.claim(claim_request(key, lease_ms=SHORT_LEASE_MS))
    assert isinstance(taken, Claimed)
    return taken.fence


async def test_only_the_newest_of_many_stale_holders_can_write(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fences = [await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))]
    for _ in range(TAKEOVERS):
        fences.append(await hand_over(store, key))
    current, stale = fences[-1], fences[:-1]
    assert len(set(fences)) == len(fences)
    assert current == max(fences)

    # Every attempt that ever held the key wakes up and writes at the same moment.
    outcomes = [completed(body=f"from {fence}".encode()) for fence in fences]
    writes = await asyncio.gather(
        *(
            store.settle(key, fence, outcome)
            for fence, outcome in zip(fences, outcomes, strict=True)
        ),
        *(store.renew(key, fence, 60_000) for fence in stale),
    )

    assert writes[: len(fences)] == [False] * len(stale) + [True]
    assert not any(writes[len(fences) :])
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.COMPLETED
    assert record.fence == current
    assert record.response is not None
    assert record.response.body == f"from {current}".encode()
    events = await store.read_events(ns)
    assert [event.type for event in events].count(EventType.COMPLETED) == 1


async def test_a_stale_holder_cannot_mark_the_new_attempt_unknown_or_free(
    store: Store, ns: str
) -> None:
    key = RecordKey(ns, "e1")
    first = await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))
    second = await hand_over(store, key)

    for state in (RecordState.UNKNOWN, RecordState.NOT_APPLIED):
        assert not await store.settle(key, first, Settlement(state, reason="stale"))
    record = await store.get(key)
    assert record is not None
    assert (record.state, record.fence) == (RecordState.IN_FLIGHT, second)
    assert record.key not in {r.key for r in await store.list_unknown(ns)}
    # The new holder still settles as if nothing happened.
    assert await store.settle(key, second, completed())
