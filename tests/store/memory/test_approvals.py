"""What only the memory store's approvals show: its clock, driven by the test, decides."""

from __future__ import annotations

from idemproxy.store.approvals import ApprovalState, DecideRequest, HoldRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import EffectMeta, RecordKey

REQUEST = HoldRequest(RecordKey("agent", "e1"), "fp", EffectMeta(), "rule", "summary", 100, 50)


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


async def test_validity_and_keep_run_on_the_stores_clock() -> None:
    clock = Clock()
    store = MemoryStore(clock_ms=clock)
    audit = AuditEntry(agent="agent", action="approval.approve", actor="alice", target="a")
    decide = DecideRequest("agent", REQUEST.approval_id, True, audit)
    await store.hold(REQUEST)
    approval = await store.decide(decide)
    assert approval is not None
    assert approval.valid_until_ms == 1_050

    clock.now_ms = 1_049
    assert await store.expire_approvals("agent") == []
    clock.now_ms = 1_050
    [expired] = await store.expire_approvals("agent")
    assert expired.state is ApprovalState.EXPIRED

    clock.now_ms = 1_149  # kept 100 ms from the expiry
    assert await store.get_approval("agent", REQUEST.approval_id) == expired
    clock.now_ms = 1_150
    assert await store.get_approval("agent", REQUEST.approval_id) is None
