"""The approvals' state machine (store/approvals.py), decided from the approval and the time."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.store.approvals import (
    MAX_SUMMARY_CHARS,
    Approval,
    ApprovalState,
    DecideRequest,
    HoldRequest,
    approval_extra,
    approval_id,
    approval_link,
    decided,
    expires_ms,
    held,
    lapsed,
    take_answer,
    taken,
)
from idemproxy.store.journal import AuditEntry
from idemproxy.store.records import EffectMeta, EventType, RecordKey

KEY = RecordKey("agent", "e1")
REQUEST = HoldRequest(KEY, "fp-1", EffectMeta(action="reply"), "needs alice", "x" * 5000, 1000, 500)


def decide(approve: bool) -> DecideRequest:
    audit = AuditEntry(agent="agent", action="approval.decide", actor="alice", target="a")
    return DecideRequest("agent", REQUEST.approval_id, approve, audit, "alice", "n")


def opened(now_ms: int = 10) -> Approval:
    change = held(None, REQUEST, now_ms)
    assert change is not None
    return change.approval


def approved(now_ms: int = 20, valid_ms: int = 500) -> Approval:
    change = decided(dataclasses.replace(opened(), valid_ms=valid_ms), decide(True), now_ms)
    assert change is not None
    return change.approval


@given(st.text(), st.text(), st.text(), st.text())
def test_an_approval_id_is_one_per_key_and_payload(
    agent: str, effect_id: str, first: str, second: str
) -> None:
    key = RecordKey(agent, effect_id)
    assert approval_id(key, first) == approval_id(key, first)
    assert (approval_id(key, first) == approval_id(key, second)) == (first == second)


def test_a_first_hold_opens_one_with_its_summary_cut() -> None:
    approval = opened()
    assert (approval.state, approval.requests, approval.requested_ms) == (
        ApprovalState.AWAITING,
        1,
        10,
    )
    assert len(approval.summary) == MAX_SUMMARY_CHARS
    assert held(approval, REQUEST, 11) is None


def test_a_decision_is_taken_from_awaiting_only() -> None:
    approval = approved()
    assert (approval.valid_until_ms, approval.actor) == (520, "alice")
    assert decided(approval, decide(False), 30) is None
    assert decided(None, decide(True), 30) is None
    denied = decided(opened(), decide(False), 20)
    assert denied is not None
    assert (denied.approval.state, denied.approval.valid_until_ms) == (ApprovalState.DENIED, 0)
    assert denied.events == (EventType.DENIED,)
    assert held(denied.approval, REQUEST, 30) is None


def test_a_take_uses_it_in_time_and_expires_it_after() -> None:
    approval = approved()
    used = taken(approval, 519)
    assert used is not None
    assert (used.approval.state, used.events) == (ApprovalState.USED, ())
    late = taken(approval, 520)
    assert late is not None
    assert (late.approval.state, late.events) == (
        ApprovalState.EXPIRED,
        (EventType.APPROVAL_EXPIRED,),
    )
    assert taken(used.approval, 521) is None
    assert lapsed(opened(), 10**12) is None


def test_only_the_take_that_used_it_gets_it_back_used() -> None:
    approval = approved()
    change = taken(approval, 100)
    assert take_answer(approval, change) == dataclasses.replace(approval, state=ApprovalState.USED)
    used = dataclasses.replace(approval, state=ApprovalState.USED)
    assert take_answer(used, taken(used, 100)) is None
    assert take_answer(None, None) is None
    assert take_answer(opened(), taken(opened(), 100)) == opened()


def test_a_hold_on_a_lapsed_approval_expires_it_then_asks_again() -> None:
    change = held(approved(), REQUEST, 600)
    assert change is not None
    assert change.events == (EventType.APPROVAL_EXPIRED, EventType.APPROVAL_REQUESTED)
    again = change.approval
    assert (again.state, again.requests, again.requested_ms) == (ApprovalState.AWAITING, 2, 600)
    assert (again.actor, again.note, again.valid_until_ms, again.decided_ms) == ("", "", 0, 0)
    # Its expiry is told as it expired: approved by alice, until then.
    told = change.told(EventType.APPROVAL_EXPIRED)
    assert (told.state, told.actor, told.valid_until_ms) == (ApprovalState.EXPIRED, "alice", 520)
    assert change.told(EventType.APPROVAL_REQUESTED) is again


def test_the_extra_fields_name_the_approval_and_its_decision() -> None:
    assert approval_extra(opened()) == {"approval_id": REQUEST.approval_id, "rule": "needs alice"}
    assert approval_extra(approved()) == {
        "approval_id": REQUEST.approval_id,
        "rule": "needs alice",
        "actor": "alice",
        "valid_until_ms": "520",
    }


def test_an_open_approval_is_kept_for_ever_and_a_settled_one_for_its_keep() -> None:
    assert expires_ms(opened(), 50) is None
    assert expires_ms(approved(), 50) is None
    assert expires_ms(dataclasses.replace(approved(), state=ApprovalState.USED), 50) == 1050


def test_the_link_percent_encodes_the_agent() -> None:
    assert approval_link("team/bot", "ap_1") == "/v1/approvals/team%2Fbot/ap_1"
