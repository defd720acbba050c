"""The contract every store backend must keep: the memory store's semantics, exactly.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from idemproxy.store.protocols import RecordStore, Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    EventType,
    RecordKey,
    RecordState,
    Refused,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
    Standing,
    StoredResponse,
)

LONG_LEASE_MS = 30_000
SHORT_LEASE_MS = 50


def claim_request(
    key: RecordKey,
    fingerprint: str = "fp-1",
    batch: str = "batch-1",
    lease_ms: int = LONG_LEASE_MS,
    ttl_s: int = 600,
    reworded_may_reclaim: bool = False,
) -> ClaimRequest:
    meta = EffectMeta(
        batch=batch,
        tool_call=f"call-{key.effect_id}",
        action="discord_reply",
        upstream="discord",
        method="POST",
        path="/api/v10/channels/1/messages",
    )
    return ClaimRequest(
        key, fingerprint, meta, lease_ms, ttl_s, reworded_may_reclaim=reworded_may_reclaim
    )


def completed(status: int = 200, body: bytes = b'{"id":"m1"}', ttl_s: int = 600) -> Settlement:
    response = StoredResponse(status, (("content-type", "application/json"),), body)
    return Settlement(RecordState.COMPLETED, response, external_id="m1", ttl_s=ttl_s)


async def claim_fence(store: RecordStore, request: ClaimRequest) -> int:
    """The fence of a claim that must take the key."""
    result = await store.claim(request)
    assert isinstance(result, Claimed), result
    return result.fence


async def fence_of(store: Store, key: RecordKey) -> int:
    """The fence the key's record holds now (an attempt's claim returned it)."""
    record = await store.get(key)
    assert record is not None
    return record.fence


async def event_types(store: Store, agent: str) -> list[EventType]:
    return [event.type for event in await store.read_events(agent)]


async def test_first_claim_takes_the_key_in_flight(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    result = await store.claim(claim_request(key))
    assert isinstance(result, Claimed)
    assert result.fence == 1
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.IN_FLIGHT
    assert (record.fence, record.attempts, record.fingerprint) == (1, 1, "fp-1")
    assert record.meta == claim_request(key).meta
    assert record.lease_expires_ms == record.created_ms + LONG_LEASE_MS
    assert record.updated_ms == record.created_ms > 0
    assert record.response is None
    assert await store.read_events(ns) == []
    assert result.first_attempt_ms == record.created_ms


async def test_claim_under_a_live_lease_is_refused_with_the_record(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    result = await store.claim(claim_request(key))
    assert isinstance(result, Standing)
    assert result.record.fence == 1
    assert result.record.state is RecordState.IN_FLIGHT
    assert await store.read_events(ns) == []


async def test_concurrent_claims_let_exactly_one_attempt_in(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    results = await asyncio.gather(*(store.claim(claim_request(key)) for _ in range(20)))
    assert sum(isinstance(result, Claimed) for result in results) == 1


async def test_settle_completed_keeps_the_response_and_emits_completed(
    store: Store, ns: str
) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, completed(201))
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.COMPLETED
    assert record.response == completed(201).response
    assert record.external_id == "m1"
    assert record.updated_ms >= record.created_ms
    [event] = await store.read_events(ns)
    assert event.type is EventType.COMPLETED
    assert (event.key, event.meta, event.status) == (key, record.meta, 201)
    assert event.external_id == "m1"
    assert event.ts_ms == record.updated_ms


async def test_completed_with_an_error_status_emits_failed(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, completed(500))
    assert await event_types(store, ns) == [EventType.FAILED]


async def test_claim_of_a_completed_record_replays_it(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    await store.settle(key, fence, completed(body=b"stored body"))
    result = await store.claim(claim_request(key))
    assert isinstance(result, Standing)
    assert result.record.state is RecordState.COMPLETED
    assert result.record.response is not None
    assert result.record.response.body == b"stored body"
    assert await event_types(store, ns) == [EventType.COMPLETED, EventType.REPLAYED]


async def test_a_reused_key_is_returned_but_not_replayed(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    await store.settle(key, fence, completed())
    result = await store.claim(claim_request(key, fingerprint="another request"))
    assert isinstance(result, Standing)
    assert result.record.fingerprint == "fp-1"
    assert await event_types(store, ns) == [EventType.COMPLETED]


async def test_unknown_goes_to_review_and_is_never_reclaimed(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    unknown = Settlement(RecordState.UNKNOWN, reason="upstream timed out after sending")
    assert await store.settle(key, fence, unknown)
    result = await store.claim(claim_request(key))
    assert isinstance(result, Standing)
    assert result.record.state is RecordState.UNKNOWN
    assert result.record.reason == "upstream timed out after sending"
    assert [record.key for record in await store.list_unknown(ns)] == [key]
    assert await event_types(store, ns) == [EventType.UNKNOWN, EventType.AGENT_ERROR]


async def test_not_applied_frees_the_key_for_the_same_request(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    freed = Settlement(RecordState.NOT_APPLIED, completed(429).response, reason="rate limited")
    assert await store.settle(key, fence, freed)
    first = await store.get(key)
    result = await store.claim(claim_request(key))
    assert isinstance(result, Claimed)
    assert result.fence == 2
    record = await store.get(key)
    assert first is not None
    assert record is not None
    assert record.state is RecordState.IN_FLIGHT
    assert (record.attempts, record.created_ms) == (2, first.created_ms)
    # A native key cut from the first attempt's time is the same for this one.
    assert result.first_attempt_ms == first.created_ms
    assert (record.response, record.external_id, record.reason) == (None, "", "")
    assert await event_types(store, ns) == [EventType.NOT_APPLIED]


async def test_not_applied_is_not_reclaimed_by_a_different_request(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    await store.settle(key, fence, Settlement(RecordState.NOT_APPLIED))
    result = await store.claim(claim_request(key, fingerprint="fp-2"))
    assert isinstance(result, Standing)
    assert result.record.state is RecordState.NOT_APPLIED
    assert result.record.fence == 1


async def test_not_applied_is_reclaimed_by_a_reworded_tool_call(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    await store.settle(key, fence, Settlement(RecordState.NOT_APPLIED, reason="rate limited"))
    result = await store.claim(claim_request(key, fingerprint="fp-2", reworded_may_reclaim=True))
    assert isinstance(result, Claimed)
    assert result.fence == 2
    record = await store.get(key)
    assert record is not None
    assert (record.state, record.fingerprint, record.attempts) == (RecordState.IN_FLIGHT, "fp-2", 2)


async def test_a_reworded_tool_call_reclaims_only_a_freed_key(store: Store, ns: str) -> None:
    done, unknown = RecordKey(ns, "done"), RecordKey(ns, "unknown")
    await store.settle(done, await claim_fence(store, claim_request(done)), completed())
    fence = await claim_fence(store, claim_request(unknown))
    await store.settle(unknown, fence, Settlement(RecordState.UNKNOWN, reason="timed out"))
    for key, state in ((done, RecordState.COMPLETED), (unknown, RecordState.UNKNOWN)):
        result = await store.claim(claim_request(key, "fp-2", reworded_may_reclaim=True))
        assert isinstance(result, Standing)
        assert (result.record.state, result.record.fingerprint) == (state, "fp-1")
    assert EventType.REPLAYED not in await event_types(store, ns)


async def test_a_stale_fence_can_neither_settle_nor_renew(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    stale = await claim_fence(store, claim_request(key))
    await store.settle(key, stale, Settlement(RecordState.NOT_APPLIED))
    assert await claim_fence(store, claim_request(key)) > stale
    before = await store.get(key)
    assert not await store.settle(key, stale, completed())
    assert not await store.renew(key, stale, 60_000)
    assert await store.get(key) == before
    assert await event_types(store, ns) == [EventType.NOT_APPLIED]


async def test_a_settled_attempt_cannot_settle_again(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key))
    assert await store.settle(key, fence, completed(body=b"first"))
    assert not await store.settle(key, fence, completed(body=b"second"))
    assert not await store.renew(key, fence, 60_000)
    record = await store.get(key)
    assert record is not None
    assert record.response is not None
    assert record.response.body == b"first"
    assert await event_types(store, ns) == [EventType.COMPLETED]


async def test_settle_and_renew_of_a_missing_record_are_refused(store: Store, ns: str) -> None:
    key = RecordKey(ns, "never claimed")
    assert not await store.settle(key, 1, completed())
    assert not await store.renew(key, 1, 1000)
    assert await store.get(key) is None
    assert await store.read_events(ns) == []


async def test_renew_keeps_a_long_attempt_alive(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))
    assert await store.renew(key, fence, LONG_LEASE_MS)
    await asyncio.sleep(0.15)
    result = await store.claim(claim_request(key))
    assert isinstance(result, Standing)
    assert result.record.state is RecordState.IN_FLIGHT
    assert result.record.lease_expires_ms > result.record.created_ms + LONG_LEASE_MS - 1000
    assert await store.settle(key, fence, completed())


async def test_an_expired_lease_turns_unknown_on_the_next_claim(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))
    await asyncio.sleep(0.15)
    result = await store.claim(claim_request(key))
    assert isinstance(result, Standing)
    assert result.record.state is RecordState.UNKNOWN
    assert "lease expired" in result.record.reason
    assert result.record.fence == fence
    # This claim made the change, so the proxy can audit it; the next one only finds it.
    assert result.lapsed
    again = await store.claim(claim_request(key))
    assert isinstance(again, Standing)
    assert not again.lapsed
    event, error = await store.read_events(ns)
    assert (event.type, event.key, event.reason) == (
        EventType.UNKNOWN,
        key,
        result.record.reason,
    )
    assert (error.type, error.key) == (EventType.AGENT_ERROR, key)
    assert [record.key for record in await store.list_unknown(ns)] == [key]
    # The holder's late answer is dropped: it was not there to see the outcome through.
    assert not await store.settle(key, fence, completed())
    assert (await store.get(key)) == result.record


async def test_a_late_settle_is_accepted_while_nobody_took_over(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key, lease_ms=SHORT_LEASE_MS))
    await asyncio.sleep(0.15)
    assert await store.settle(key, fence, completed())
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.COMPLETED


async def test_records_past_their_ttl_are_gone(store: Store, ns: str) -> None:
    done, freed = RecordKey(ns, "done"), RecordKey(ns, "freed")
    # The TTL a claim carries is not the record's: an outcome's TTL counts from the outcome.
    done_fence = await claim_fence(store, claim_request(done, ttl_s=600))
    assert await store.settle(done, done_fence, completed(ttl_s=1))
    freed_fence = await claim_fence(store, claim_request(freed, batch="freed", ttl_s=600))
    assert await store.settle(freed, freed_fence, Settlement(RecordState.NOT_APPLIED, ttl_s=1))
    await asyncio.sleep(1.2)
    assert await store.get(done) is None
    assert await store.get(freed) is None
    assert await store.batch_records(ns, "batch-1") == []
    assert await store.batch_records(ns, "freed") == []
    result = await store.claim(claim_request(done))
    assert isinstance(result, Claimed)
    record = await store.get(done)
    assert record is not None
    assert record.attempts == 1


async def test_an_attempt_in_flight_is_held_past_its_ttl(store: Store, ns: str) -> None:
    key = RecordKey(ns, "slow")
    fence = await claim_fence(store, claim_request(key, ttl_s=1))
    await asyncio.sleep(1.2)
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.IN_FLIGHT
    assert [held.key for held in await store.batch_records(ns, "batch-1")] == [key]
    assert not isinstance(await store.claim(claim_request(key, ttl_s=1)), Claimed)
    assert await store.settle(key, fence, completed(ttl_s=600))


async def test_the_ttl_counts_from_the_outcome(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key, ttl_s=1))
    await asyncio.sleep(0.7)
    assert await store.settle(key, fence, completed(ttl_s=1))
    await asyncio.sleep(0.6)
    assert await store.get(key) is not None  # 1.3 s after the claim, 0.6 s after the outcome
    await asyncio.sleep(0.6)
    assert await store.get(key) is None


async def test_unknown_outcomes_are_held_until_resolved(store: Store, ns: str) -> None:
    settled, lapsed = RecordKey(ns, "settled"), RecordKey(ns, "lapsed")
    fence = await claim_fence(store, claim_request(settled, ttl_s=1))
    assert await store.settle(settled, fence, Settlement(RecordState.UNKNOWN, ttl_s=1))
    await store.claim(claim_request(lapsed, lease_ms=SHORT_LEASE_MS, ttl_s=1))
    await asyncio.sleep(SHORT_LEASE_MS / 1000 + 0.05)
    assert [record.key for record in await store.sweep_expired(ns)] == [lapsed]
    await asyncio.sleep(1.2)
    assert {record.key for record in await store.list_unknown(ns)} == {settled, lapsed}
    assert {record.key for record in await store.batch_records(ns, "batch-1")} == {
        settled,
        lapsed,
    }
    for key in (settled, lapsed):
        seen = await store.claim(claim_request(key, ttl_s=1))
        assert isinstance(seen, Standing)
        assert seen.record.state is RecordState.UNKNOWN
    verdict = Resolution(RecordState.NOT_APPLIED, reason="checked: not sent", ttl_s=1)
    assert isinstance(
        await store.resolve(ResolveRequest(settled, RecordState.UNKNOWN, verdict)), Resolved
    )
    await asyncio.sleep(1.2)
    assert await store.get(settled) is None
    assert [record.key for record in await store.list_unknown(ns)] == [lapsed]


async def test_fences_keep_growing_when_a_record_expires(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    stale = await claim_fence(store, claim_request(key, ttl_s=1))
    # An operator frees the key under a slow attempt, and the freed record expires.
    verdict = Resolution(RecordState.NOT_APPLIED, reason="operator: not sent", ttl_s=1)
    freed = await store.resolve(ResolveRequest(key, RecordState.IN_FLIGHT, verdict))
    assert isinstance(freed, Resolved)
    assert freed.record is not None
    assert freed.record.fence > stale
    await asyncio.sleep(1.2)
    assert await store.get(key) is None
    taken = await store.claim(claim_request(key))
    assert isinstance(taken, Claimed)
    assert taken.fence > freed.record.fence
    # The slow attempt wakes up: its fence is older than the new attempt's.
    assert not await store.settle(key, stale, completed(body=b"late"))
    assert not await store.renew(key, stale, LONG_LEASE_MS)
    assert await store.settle(key, taken.fence, completed())


async def test_events_come_in_order_and_page_with_after(store: Store, ns: str) -> None:
    for i in range(5):
        key = RecordKey(ns, f"e{i}")
        await store.claim(claim_request(key))
        await store.settle(key, await fence_of(store, key), completed(200 + i))
    everything = await store.read_events(ns)
    assert [event.status for event in everything] == [200, 201, 202, 203, 204]
    assert len({event.event_id for event in everything}) == 5
    paged, after = [], None
    while page := await store.read_events(ns, after=after, limit=2):
        assert len(page) <= 2
        paged += page
        after = page[-1].event_id
    assert paged == everything
    assert await store.read_events(ns, after=everything[-1].event_id) == []
    assert await store.read_events(ns, after=everything[1].event_id) == everything[2:]
    assert await store.read_events(f"{ns}-other") == []
    assert await store.read_events(ns, limit=0) == []


async def test_events_are_kept_per_agent(store: Store, ns: str) -> None:
    for agent in (f"{ns}-a", f"{ns}-b"):
        key = RecordKey(agent, "e1")
        await store.claim(claim_request(key))
        await store.settle(key, await fence_of(store, key), completed())
    for agent in (f"{ns}-a", f"{ns}-b"):
        assert [event.key.agent for event in await store.read_events(agent)] == [agent]


async def test_batch_records_lists_the_batch_oldest_first(store: Store, ns: str) -> None:
    keys = [RecordKey(ns, f"e{i}") for i in (3, 1, 2)]
    for key in keys:
        await store.claim(claim_request(key))
        await asyncio.sleep(0.005)
    await store.claim(claim_request(RecordKey(ns, "other"), batch="batch-2"))
    await store.claim(claim_request(RecordKey(f"{ns}-b", "e9")))
    await store.settle(keys[1], await fence_of(store, keys[1]), completed())
    records = await store.batch_records(ns, "batch-1")
    assert [record.key for record in records] == keys
    assert records[1].state is RecordState.COMPLETED
    assert [r.key.effect_id for r in await store.batch_records(ns, "batch-2")] == ["other"]
    assert await store.batch_records(ns, "no such batch") == []


async def test_a_freed_key_claimed_under_another_batch_moves(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key, batch="batch-1"))
    await store.settle(key, await fence_of(store, key), Settlement(RecordState.NOT_APPLIED))
    assert isinstance(await store.claim(claim_request(key, batch="batch-2")), Claimed)
    assert await store.batch_records(ns, "batch-1") == []
    assert [record.key for record in await store.batch_records(ns, "batch-2")] == [key]


async def test_list_unknown_is_oldest_first_and_limited(store: Store, ns: str) -> None:
    keys = [RecordKey(ns, f"u{i}") for i in (2, 0, 1)]
    for key in keys:
        await store.claim(claim_request(key))
    for key in keys:
        await asyncio.sleep(0.005)
        await store.settle(
            key, await fence_of(store, key), Settlement(RecordState.UNKNOWN, reason=key.effect_id)
        )
    done = RecordKey(ns, "done")
    await store.claim(claim_request(done))
    await store.settle(done, await fence_of(store, done), completed())
    assert [record.key for record in await store.list_unknown(ns)] == keys
    assert [record.key for record in await store.list_unknown(ns, limit=2)] == keys[:2]
    assert await store.list_unknown(ns, limit=0) == []
    assert await store.list_unknown(f"{ns}-other") == []


BODIES = {
    "empty": b"",
    "all byte values": bytes(range(256)) * 4,
    "not utf-8": b"\xff\xfe\xc3\x28\x00\x80",
    "large": os.urandom(1 << 20),
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
async def test_bodies_and_headers_round_trip_byte_for_byte(
    store: Store, ns: str, body: bytes
) -> None:
    headers = (
        ("content-type", "application/octet-stream"),
        ("x-dup", "1"),
        ("x-dup", "2"),
        ("x-empty", ""),
        ("x-unicode", "héllo ✓ 名前"),
        # aiohttp hands over non-UTF-8 header bytes as lone surrogates.
        ("x-raw", b"caf\xe9".decode("utf-8", "surrogateescape")),
        ("x-json", '{"a": [1, "\\"quoted\\""]}'),
    )
    response = StoredResponse(207, headers, body, body_truncated=True)
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    assert await store.settle(
        key, await fence_of(store, key), Settlement(RecordState.COMPLETED, response)
    )
    record = await store.get(key)
    assert record is not None
    assert record.response == response
    replay = await store.claim(claim_request(key))
    assert isinstance(replay, Standing)
    assert replay.record.response == response


HOSTILE_SUFFIXES = ["", "{", "}", "}:r:e", ":", "/", " spaced out ", "é✓名", "%7B", "%", "*"]


async def test_hostile_ids_stay_separate(store: Store, ns: str) -> None:
    agents = [ns + suffix for suffix in HOSTILE_SUFFIXES]
    effects = ["e", "e:x", "e%3Ax", "e/x", "{e}", "", "é"]
    for agent in agents:
        for effect in effects:
            key = RecordKey(agent, effect)
            meta_batch = f"{agent}|{effect}"
            assert isinstance(await store.claim(claim_request(key, batch=meta_batch)), Claimed)
            body = f"{agent}|{effect}".encode()
            assert await store.settle(key, await fence_of(store, key), completed(body=body))
    for agent in agents:
        for effect in effects:
            record = await store.get(RecordKey(agent, effect))
            assert record is not None
            assert record.response is not None
            assert record.response.body == f"{agent}|{effect}".encode()
            batch = await store.batch_records(agent, f"{agent}|{effect}")
            assert [r.key for r in batch] == [RecordKey(agent, effect)]
        events = await store.read_events(agent)
        assert [event.key for event in events] == [RecordKey(agent, e) for e in effects]


async def test_ping_answers(store: Store) -> None:
    await store.ping()


def unknown_settlement() -> Settlement:
    return Settlement(RecordState.UNKNOWN, reason="no answer within read timeout", ttl_s=600)


async def test_resolve_applied_replays_the_supplied_response(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), unknown_settlement())
    response = StoredResponse(200, (("content-type", "application/json"),), b'{"id":"m9"}')
    resolution = Resolution(
        RecordState.COMPLETED, response, external_id="m9", reason="seen in the channel"
    )

    result = await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution))

    assert isinstance(result, Resolved)
    assert result.record is not None
    assert result.record.state is RecordState.COMPLETED
    assert result.record.fence == 2
    assert await store.list_unknown(ns) == []
    replay = await store.claim(claim_request(key))
    assert isinstance(replay, Standing)
    assert replay.record.response == response
    assert replay.record.external_id == "m9"
    events = await store.read_events(ns)
    assert [e.type for e in events] == [
        EventType.UNKNOWN,
        EventType.AGENT_ERROR,
        EventType.RESOLVED,
        EventType.REPLAYED,
    ]
    assert events[2].state == "completed"
    assert events[2].reason == "seen in the channel"


async def test_resolve_not_applied_frees_the_key(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), unknown_settlement())
    result = await store.resolve(
        ResolveRequest(key, RecordState.UNKNOWN, Resolution(RecordState.NOT_APPLIED))
    )
    assert isinstance(result, Resolved)
    again = await store.claim(claim_request(key))
    assert isinstance(again, Claimed)
    assert again.fence == 3
    assert (await store.read_events(ns))[-1].state == "not_applied"


async def test_resolve_is_compare_and_set(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    missing = await store.resolve(
        ResolveRequest(key, RecordState.UNKNOWN, Resolution(RecordState.NOT_APPLIED))
    )
    assert missing == Refused(None)
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), completed())
    refused = await store.resolve(
        ResolveRequest(key, RecordState.UNKNOWN, Resolution(RecordState.NOT_APPLIED))
    )
    assert isinstance(refused, Refused)
    assert refused.record is not None
    assert refused.record.state is RecordState.COMPLETED
    assert (await store.get(key)) == refused.record
    assert await event_types(store, ns) == [EventType.COMPLETED]


async def test_concurrent_resolutions_let_exactly_one_win(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), unknown_settlement())
    verdicts = [Resolution(RecordState.COMPLETED), Resolution(RecordState.NOT_APPLIED)] * 5
    results = await asyncio.gather(
        *(store.resolve(ResolveRequest(key, RecordState.UNKNOWN, verdict)) for verdict in verdicts)
    )
    assert sum(isinstance(result, Resolved) for result in results) == 1
    assert (await event_types(store, ns)).count(EventType.RESOLVED) == 1


async def test_resolving_an_attempt_in_flight_fences_its_late_settle(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    stale = await claim_fence(store, claim_request(key))
    result = await store.resolve(
        ResolveRequest(key, RecordState.IN_FLIGHT, Resolution(RecordState.NOT_APPLIED))
    )
    assert isinstance(result, Resolved)
    assert not await store.settle(key, stale, completed())
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.NOT_APPLIED


def test_a_resolution_cannot_leave_a_record_in_doubt() -> None:
    with pytest.raises(ValueError, match="completed"):
        Resolution(RecordState.UNKNOWN)
