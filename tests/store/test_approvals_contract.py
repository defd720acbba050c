"""The approvals contract (store/approvals.py) every backend keeps: one approval per payload and
key, asked for, decided once, taken once or expired, each change with its events in the outbox.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
Times are the store's own, so the tests that need one to pass use short validities and sleep.
"""

from __future__ import annotations

import asyncio

from idemproxy.store.approvals import Approval, ApprovalState, DecideRequest, HoldRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectEvent, EffectMeta, EventType, RecordKey
from idemproxy.store.work import Work
from tests.store.test_contract import event_types
from tests.store.test_worklist_contract import busy, forgets_at_once

META = EffectMeta(
    batch="batch-1",
    tool_call="call-1",
    action="discord_reply",
    upstream="discord",
    method="POST",
    path="/api/v10/channels/1/messages",
)
RULE = "discord_reply needs an operator"
SHORT_MS = 60
LONG_MS = 60_000


def hold_request(
    key: RecordKey, fingerprint: str = "fp-1", keep_ms: int = LONG_MS, valid_ms: int = LONG_MS
) -> HoldRequest:
    summary = "POST /messages {'content': 'hi'}"
    return HoldRequest(key, fingerprint, META, RULE, summary, keep_ms, valid_ms)


def decide_request(approval: Approval, approve: bool, note: str = "") -> DecideRequest:
    agent = approval.key.agent
    action = "approval.approve" if approve else "approval.deny"
    audit = AuditEntry(agent=agent, action=action, actor="alice", target=approval.approval_id)
    return DecideRequest(agent, approval.approval_id, approve, audit, "alice", note)


async def approved(store: Store, key: RecordKey, valid_ms: int = LONG_MS) -> Approval:
    approval = await store.decide(
        decide_request(await store.hold(hold_request(key, valid_ms=valid_ms)), True)
    )
    assert approval is not None
    return approval


async def last_event(store: Store, agent: str) -> EffectEvent:
    return (await store.read_events(agent))[-1]


async def test_a_hold_opens_one_awaiting_approval_with_its_event(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    approval = await store.hold(hold_request(key))

    assert approval.state is ApprovalState.AWAITING
    assert (approval.key, approval.fingerprint, approval.meta) == (key, "fp-1", META)
    assert (approval.requests, approval.rule, approval.requested_ms > 0) == (1, RULE, True)
    assert approval.approval_id == hold_request(key).approval_id
    assert await store.get_approval(ns, approval.approval_id) == approval
    [event] = await store.read_events(ns)
    assert (event.type, event.key, event.meta) == (EventType.APPROVAL_REQUESTED, key, META)
    assert event.state == "awaiting_approval"
    assert event.extra == {"approval_id": approval.approval_id, "rule": RULE}
    assert ns in await store.list_agents()


async def test_a_hold_again_leaves_it_as_it_is(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    first = await store.hold(hold_request(key))
    assert await store.hold(hold_request(key)) == first
    approval = await approved(store, key)
    assert await store.hold(hold_request(key)) == approval
    assert await event_types(store, ns) == [EventType.APPROVAL_REQUESTED, EventType.APPROVED]


async def test_another_payload_under_the_key_is_another_approval(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    first = await store.hold(hold_request(key, "fp-1"))
    second = await store.hold(hold_request(key, "fp-2"))
    assert first.approval_id != second.approval_id
    assert second.state is ApprovalState.AWAITING
    assert await event_types(store, ns) == [EventType.APPROVAL_REQUESTED] * 2


async def test_an_approval_is_usable_for_its_validity_by_the_stores_clock(
    store: Store, ns: str
) -> None:
    awaiting = await store.hold(hold_request(RecordKey(ns, "e1"), valid_ms=5_000))
    approval = await store.decide(decide_request(awaiting, True, note="ok"))

    assert approval is not None
    assert (approval.state, approval.actor, approval.note) == (
        ApprovalState.APPROVED,
        "alice",
        "ok",
    )
    assert approval.decided_ms >= awaiting.requested_ms
    assert approval.valid_until_ms == approval.decided_ms + 5_000
    assert await store.get_approval(ns, approval.approval_id) == approval
    event = await last_event(store, ns)
    assert (event.type, event.state, event.reason) == (EventType.APPROVED, "approved", "ok")
    assert event.extra == {
        "approval_id": approval.approval_id,
        "rule": RULE,
        "actor": "alice",
        "valid_until_ms": str(approval.valid_until_ms),
    }
    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.actor, entry.target) == (
        "approval.approve",
        "alice",
        approval.approval_id,
    )


async def test_a_denial_is_final_and_carries_the_operators_note(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    awaiting = await store.hold(hold_request(key))
    denied = await store.decide(decide_request(awaiting, False, note="not this channel"))

    assert denied is not None
    assert (denied.state, denied.valid_until_ms, denied.note) == (
        ApprovalState.DENIED,
        0,
        "not this channel",
    )
    event = await last_event(store, ns)
    assert (event.type, event.state, event.reason) == (
        EventType.DENIED,
        "denied",
        "not this channel",
    )
    assert [entry.action for entry in await store.read_audit(ns)] == ["approval.deny"]
    assert await store.hold(hold_request(key)) == denied
    assert await store.take(ns, denied.approval_id) == denied
    assert await event_types(store, ns) == [EventType.APPROVAL_REQUESTED, EventType.DENIED]


async def test_a_decision_on_one_that_awaits_none_changes_nothing(store: Store, ns: str) -> None:
    approval = await approved(store, RecordKey(ns, "e1"))
    assert await store.decide(decide_request(approval, False, note="too late")) is None
    missing = decide_request(approval, True)
    missing = DecideRequest(ns, "ap_missing", True, missing.audit)
    assert await store.decide(missing) is None

    assert await store.get_approval(ns, approval.approval_id) == approval
    assert await event_types(store, ns) == [EventType.APPROVAL_REQUESTED, EventType.APPROVED]
    assert len(await store.read_audit(ns)) == 1


async def test_an_approval_is_taken_once(store: Store, ns: str) -> None:
    approval = await approved(store, RecordKey(ns, "e1"))
    used = await store.take(ns, approval.approval_id)
    assert used is not None
    assert used.state is ApprovalState.USED
    # A second take finds it used by another: nothing to take, nothing to forward on.
    assert await store.take(ns, approval.approval_id) is None
    assert await store.get_approval(ns, approval.approval_id) == used
    assert await store.take(ns, "ap_missing") is None
    assert await event_types(store, ns) == [EventType.APPROVAL_REQUESTED, EventType.APPROVED]


async def test_a_take_past_its_time_finds_it_expired(store: Store, ns: str) -> None:
    approval = await approved(store, RecordKey(ns, "e1"), valid_ms=SHORT_MS)
    await asyncio.sleep(SHORT_MS * 2 / 1000)

    expired = await store.take(ns, approval.approval_id)

    assert expired is not None
    assert expired.state is ApprovalState.EXPIRED
    event = await last_event(store, ns)
    assert (event.type, event.state) == (EventType.APPROVAL_EXPIRED, "expired")
    assert await store.take(ns, approval.approval_id) == expired


async def test_a_hold_asks_again_for_a_used_or_expired_one(store: Store, ns: str) -> None:
    used_key, expired_key = RecordKey(ns, "used"), RecordKey(ns, "expired")
    approval = await approved(store, used_key)
    await store.take(ns, approval.approval_id)
    lapsing = await approved(store, expired_key, valid_ms=SHORT_MS)
    await asyncio.sleep(SHORT_MS * 2 / 1000)
    await store.take(ns, lapsing.approval_id)

    for key in (used_key, expired_key):
        again = await store.hold(hold_request(key))
        assert (again.state, again.requests) == (ApprovalState.AWAITING, 2)
        assert (again.actor, again.note, again.valid_until_ms, again.decided_ms) == ("", "", 0, 0)
        assert (await last_event(store, ns)).type is EventType.APPROVAL_REQUESTED


async def test_a_hold_on_an_approval_past_its_time_expires_it_then_asks_again(
    store: Store, ns: str
) -> None:
    key = RecordKey(ns, "e1")
    approval = await approved(store, key, valid_ms=SHORT_MS)
    await asyncio.sleep(SHORT_MS * 2 / 1000)

    again = await store.hold(hold_request(key))

    assert (again.state, again.requests) == (ApprovalState.AWAITING, 2)
    assert again.requested_ms >= approval.valid_until_ms
    assert await event_types(store, ns) == [
        EventType.APPROVAL_REQUESTED,
        EventType.APPROVED,
        EventType.APPROVAL_EXPIRED,
        EventType.APPROVAL_REQUESTED,
    ]
    # Each event tells the approval as it was at that point: the controller reads the expiry
    # of an approval the operator gave, then the new request.
    expired, asked = (await store.read_events(ns))[-2:]
    assert (expired.state, expired.extra.get("actor")) == ("expired", "alice")
    assert expired.extra.get("valid_until_ms") == str(approval.valid_until_ms)
    assert (asked.state, asked.extra.get("actor")) == ("awaiting_approval", None)


async def test_the_open_approvals_are_listed_oldest_first(store: Store, ns: str) -> None:
    approvals = []
    for index in range(4):
        approvals.append(await store.hold(hold_request(RecordKey(ns, f"e{index}"))))
        await asyncio.sleep(0.005)  # requested in distinct milliseconds
    await store.decide(decide_request(approvals[0], False))
    taken = await store.decide(decide_request(approvals[1], True))
    assert taken is not None
    await store.take(ns, taken.approval_id)
    kept = await store.decide(decide_request(approvals[3], True))
    await store.hold(hold_request(RecordKey(f"{ns}-other", "e0")))

    listed = await store.list_approvals(ns)

    assert listed == [approvals[2], kept]
    assert await store.list_approvals(ns, limit=1) == [approvals[2]]


async def test_the_sweep_expires_approvals_past_their_time(store: Store, ns: str) -> None:
    short = await approved(store, RecordKey(ns, "short"), valid_ms=SHORT_MS)
    long = await approved(store, RecordKey(ns, "long"))
    awaiting = await store.hold(hold_request(RecordKey(ns, "awaiting")))
    await asyncio.sleep(SHORT_MS * 2 / 1000)

    [expired] = await store.expire_approvals(ns)

    assert (expired.approval_id, expired.state) == (short.approval_id, ApprovalState.EXPIRED)
    assert await store.get_approval(ns, short.approval_id) == expired
    assert {a.approval_id for a in await store.list_approvals(ns)} == {
        long.approval_id,
        awaiting.approval_id,
    }
    assert (await last_event(store, ns)).type is EventType.APPROVAL_EXPIRED
    assert await store.expire_approvals(ns) == []


async def test_the_sweep_expires_no_more_than_its_limit(store: Store, ns: str) -> None:
    for index in range(3):
        await approved(store, RecordKey(ns, f"e{index}"), valid_ms=SHORT_MS)
    await asyncio.sleep(SHORT_MS * 2 / 1000)
    assert len(await store.expire_approvals(ns, limit=2)) == 2
    assert len(await store.expire_approvals(ns, limit=2)) == 1


async def test_an_open_approval_puts_its_agent_on_the_worklists(store: Store, ns: str) -> None:
    awaiting = await store.hold(hold_request(RecordKey(ns, "e1")))
    for _ in range(2):
        assert await busy(store, ns, Work.APPROVAL) == [ns]
        assert await busy(store, ns, Work.DELIVERY) == [ns]
        await store.forget_agents()

    await store.decide(decide_request(awaiting, False))
    await store.forget_agents()
    if forgets_at_once(store):
        assert await busy(store, ns, Work.APPROVAL) == []
    assert await busy(store, ns, Work.DELIVERY) == [ns]  # its denied event is not delivered


async def test_a_settled_approval_is_kept_for_its_keep_and_an_open_one_for_ever(
    store: Store, ns: str
) -> None:
    denied = await store.hold(hold_request(RecordKey(ns, "denied"), keep_ms=SHORT_MS))
    await store.decide(decide_request(denied, False))
    awaiting = await store.hold(hold_request(RecordKey(ns, "awaiting"), keep_ms=SHORT_MS))
    approval = await store.hold(hold_request(RecordKey(ns, "approved"), keep_ms=SHORT_MS))
    approval_ = await store.decide(decide_request(approval, True))
    await asyncio.sleep(SHORT_MS * 3 / 1000)

    assert await store.get_approval(ns, denied.approval_id) is None
    assert await store.get_approval(ns, awaiting.approval_id) == awaiting
    assert await store.get_approval(ns, approval.approval_id) == approval_
    # Gone: asked for again, it is a new one.
    again = await store.hold(hold_request(RecordKey(ns, "denied"), keep_ms=SHORT_MS))
    assert (again.state, again.requests) == (ApprovalState.AWAITING, 1)


async def test_of_two_takes_at_once_exactly_one_uses_the_approval(store: Store, ns: str) -> None:
    approval = await approved(store, RecordKey(ns, "e1"))
    results = await asyncio.gather(*(store.take(ns, approval.approval_id) for _ in range(2)))
    [used] = [result for result in results if result is not None]
    assert used.state is ApprovalState.USED
    assert await store.get_approval(ns, approval.approval_id) == used
