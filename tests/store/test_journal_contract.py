"""The contract of the ledger's store operations: sweeps, cursors, audit log, batch clearing.

Runs against every backend through the same ``store`` fixture as the record contract.
"""

from __future__ import annotations

import asyncio

from idemproxy.store.journal import AuditEntry, ClearedRecord, ClearRequest, DeliveryCursor
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    EventType,
    RecordKey,
    RecordState,
    Refused,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
)
from tests.store.test_contract import (
    SHORT_LEASE_MS,
    claim_fence,
    claim_request,
    completed,
    event_types,
    fence_of,
)


def entry(agent: str, action: str = "resolve", target: str = "k") -> AuditEntry:
    return AuditEntry(
        agent=agent, action=action, actor="alice", target=target, before="unknown", after="x"
    )


async def test_sweep_turns_lapsed_leases_unknown_without_a_claim(store: Store, ns: str) -> None:
    lapsed, live, done = RecordKey(ns, "lapsed"), RecordKey(ns, "live"), RecordKey(ns, "done")
    await store.claim(claim_request(lapsed, lease_ms=SHORT_LEASE_MS))
    await store.claim(claim_request(live))
    await store.claim(claim_request(done, lease_ms=SHORT_LEASE_MS))
    await store.settle(done, await fence_of(store, done), completed())
    await asyncio.sleep(0.15)

    swept = await store.sweep_expired(ns)

    assert [record.key for record in swept] == [lapsed]
    assert swept[0].state is RecordState.UNKNOWN
    assert "lease expired" in swept[0].reason
    assert await store.get(lapsed) == swept[0]
    assert [record.key for record in await store.list_unknown(ns)] == [lapsed]
    assert await event_types(store, ns) == [
        EventType.COMPLETED,
        EventType.UNKNOWN,
        EventType.AGENT_ERROR,
    ]
    assert await store.sweep_expired(ns) == []
    # The holder that comes back late is fenced off, as after a claim found the lapse.
    assert not await store.settle(lapsed, 1, completed())
    live_record = await store.get(live)
    assert live_record is not None
    assert live_record.state is RecordState.IN_FLIGHT


async def test_sweep_respects_renewals_and_its_limit(store: Store, ns: str) -> None:
    keys = [RecordKey(ns, f"e{i}") for i in range(3)]
    for key in keys:
        await store.claim(claim_request(key, lease_ms=SHORT_LEASE_MS))
    assert await store.renew(keys[0], await fence_of(store, keys[0]), 60_000)
    await asyncio.sleep(0.15)
    first = await store.sweep_expired(ns, limit=1)
    second = await store.sweep_expired(ns, limit=10)
    assert len(first) == 1
    assert {record.key for record in first + second} == set(keys[1:])
    assert await store.sweep_expired(f"{ns}-other") == []
    assert await store.sweep_expired(ns, limit=0) == []


async def test_a_record_settled_or_resolved_is_not_swept(store: Store, ns: str) -> None:
    settled, resolved = RecordKey(ns, "settled"), RecordKey(ns, "resolved")
    await store.claim(claim_request(settled, lease_ms=SHORT_LEASE_MS))
    await store.claim(claim_request(resolved, lease_ms=SHORT_LEASE_MS))
    await store.settle(settled, await fence_of(store, settled), Settlement(RecordState.NOT_APPLIED))
    await store.resolve(
        ResolveRequest(resolved, RecordState.IN_FLIGHT, Resolution(RecordState.NOT_APPLIED))
    )
    await asyncio.sleep(0.15)
    assert await store.sweep_expired(ns) == []


async def test_count_events_counts_after_a_point_up_to_a_cap(store: Store, ns: str) -> None:
    for i in range(5):
        key = RecordKey(ns, f"e{i}")
        await store.claim(claim_request(key))
        await store.settle(key, await fence_of(store, key), completed())
    events = await store.read_events(ns)
    assert await store.count_events(ns) == 5
    assert await store.count_events(ns, after=events[1].event_id) == 3
    assert await store.count_events(ns, after=events[-1].event_id) == 0
    assert await store.count_events(ns, cap=2) == 2
    assert await store.count_events(f"{ns}-none") == 0


async def test_list_agents_names_every_agent_with_records(store: Store, ns: str) -> None:
    agents = [f"{ns}-b", f"{ns}-a", f"{ns}-c"]
    for agent in agents:
        await store.claim(claim_request(RecordKey(agent, "e1")))
    listed = [agent for agent in await store.list_agents() if agent.startswith(ns)]
    assert listed == sorted(agents)


async def test_cursor_is_compare_and_set(store: Store, ns: str) -> None:
    fresh = await store.read_cursor(ns)
    assert fresh == DeliveryCursor()
    taken = await store.write_cursor(ns, DeliveryCursor(owner="p1", lease_expires_ms=5))
    assert taken is not None
    assert taken.version == 1
    assert await store.read_cursor(ns) == taken
    # A writer that read version 0 lost the race: nothing changes.
    assert await store.write_cursor(ns, DeliveryCursor(owner="p2")) is None
    assert (await store.read_cursor(ns)).owner == "p1"
    parked = DeliveryCursor(
        acked="x", attempts=3, retry_at_ms=9, last_error="503 é", parked_ms=7, version=1
    )
    written = await store.write_cursor(ns, parked)
    assert written is not None
    assert written.version == 2
    assert await store.read_cursor(ns) == written
    assert written.parked
    assert await store.read_cursor(f"{ns}-other") == DeliveryCursor()


async def test_concurrent_cursor_writes_let_exactly_one_win(store: Store, ns: str) -> None:
    results = await asyncio.gather(
        *(store.write_cursor(ns, DeliveryCursor(owner=f"p{i}")) for i in range(10))
    )
    winners = [result for result in results if result is not None]
    assert len(winners) == 1
    assert await store.read_cursor(ns) == winners[0]


async def test_a_cursor_write_can_carry_its_audit_entry(store: Store, ns: str) -> None:
    audit = entry(ns, action="delivery.retry", target=ns)
    assert await store.write_cursor(ns, DeliveryCursor(), audit) is not None
    assert await store.write_cursor(ns, DeliveryCursor(), audit) is None
    [logged] = await store.read_audit(ns)
    assert (logged.action, logged.target, logged.actor) == ("delivery.retry", ns, "alice")


async def test_audit_entries_are_stamped_and_read_newest_last(store: Store, ns: str) -> None:
    appended = [await store.append_audit(entry(ns, target=f"k{i}")) for i in range(4)]
    assert len({item.entry_id for item in appended}) == 4
    assert all(item.ts_ms > 0 for item in appended)
    assert await store.read_audit(ns) == appended
    assert await store.read_audit(ns, limit=2) == appended[2:]
    assert await store.read_audit(ns, limit=0) == []
    assert await store.read_audit(f"{ns}-other") == []
    first = appended[0]
    assert (first.actor, first.before, first.after, first.note) == ("alice", "unknown", "x", "")


async def test_a_resolution_and_its_audit_entry_are_written_together(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), Settlement(RecordState.UNKNOWN))
    audit = AuditEntry(ns, "resolve", "bob", str(key), "unknown", "not_applied", "checked")
    won = await store.resolve(
        ResolveRequest(key, RecordState.UNKNOWN, Resolution(RecordState.NOT_APPLIED), audit)
    )
    lost = await store.resolve(
        ResolveRequest(key, RecordState.UNKNOWN, Resolution(RecordState.COMPLETED), audit)
    )
    assert (type(won), type(lost)) == (Resolved, Refused)
    [logged] = await store.read_audit(ns)
    assert (logged.actor, logged.note, logged.after) == ("bob", "checked", "not_applied")


async def test_clear_batch_deletes_only_freed_records_and_keeps_the_archive(
    store: Store, ns: str
) -> None:
    freed, reclaimed, done, doubt = (RecordKey(ns, name) for name in ("f", "r", "d", "u"))
    fences = {key: await claim_fence(store, claim_request(key)) for key in (freed, reclaimed)}
    fences |= {key: await claim_fence(store, claim_request(key)) for key in (done, doubt)}
    await store.settle(freed, fences[freed], Settlement(RecordState.NOT_APPLIED))
    await store.settle(reclaimed, fences[reclaimed], Settlement(RecordState.NOT_APPLIED))
    again = await claim_fence(store, claim_request(reclaimed))  # claimed again meanwhile
    assert again > fences[reclaimed]
    await store.settle(done, fences[done], completed())
    await store.settle(doubt, fences[doubt], Settlement(RecordState.UNKNOWN))
    listed = [ClearedRecord(key.effect_id, fence) for key, fence in fences.items()]
    archive = b'{"records": "as they stood"}'

    cleared = await store.clear_batch(
        ClearRequest(ns, "batch-1", listed, archive, entry(ns, "abandon"))
    )

    assert cleared == ["f"]
    assert await store.get(freed) is None
    remaining = await store.batch_records(ns, "batch-1")
    assert {record.key for record in remaining} == {reclaimed, done, doubt}
    assert await store.read_archive(ns, "batch-1") == archive
    assert await store.read_archive(ns, "batch-2") is None
    assert [item.action for item in await store.read_audit(ns)] == ["abandon"]
    # The freed key is a first sight again, at a fence above any it had.
    taken = await store.claim(claim_request(freed))
    assert isinstance(taken, Claimed)
    assert taken.fence > fences[freed]


async def test_clear_batch_leaves_other_batches_alone(store: Store, ns: str) -> None:
    key = RecordKey(ns, "elsewhere")
    await store.claim(claim_request(key, batch="batch-2"))
    fence = await fence_of(store, key)
    await store.settle(key, fence, Settlement(RecordState.NOT_APPLIED))
    freed = [ClearedRecord(key.effect_id, fence)]
    assert (
        await store.clear_batch(ClearRequest(ns, "batch-1", freed, None, entry(ns, "restart")))
        == []
    )
    assert await store.get(key) is not None
    assert await store.read_archive(ns, "batch-1") is None
