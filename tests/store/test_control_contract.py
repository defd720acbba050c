"""The agent-control contract (store/control.py) every backend keeps: failure streaks counted in
the settle, the automatic pause with its snapshot, the pause riding on the claim, and the
compare-and-set writes of an operator's pause and resume.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from idemproxy.store.control import AgentControl, FailedAttempt, Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    Paused,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
    Standing,
    StoredResponse,
)
from tests.store.test_contract import claim_fence, claim_request, completed

LIMIT = 3
DENIED = StoredResponse(401, (("content-type", "application/json"),), b'{"error":"revoked"}')
REASON_401 = "auto-paused after 3 consecutive failures. Last error: upstream answered 401"


async def attempt(
    store: Store, key: RecordKey, settlement: Settlement, limit: int = LIMIT
) -> FailedAttempt:
    """Claim ``key`` and settle it, counted against ``limit``; the attempt it was."""
    claim = await store.claim(claim_request(key))
    assert isinstance(claim, Claimed), claim
    counted = Settlement(
        settlement.state,
        settlement.response,
        reason=settlement.reason,
        ttl_s=600,
        pause_after_failures=limit,
    )
    assert await store.settle(key, claim.fence, counted)
    return FailedAttempt(key.effect_id, claim.fence)


def denied() -> Settlement:
    return Settlement(RecordState.COMPLETED, DENIED)


def operator_audit(agent: str, action: str) -> AuditEntry:
    return AuditEntry(agent=agent, action=action, actor="alice", target=agent)


async def test_a_fresh_agent_runs_with_no_failures(store: Store, ns: str) -> None:
    assert await store.read_control(ns) == AgentControl()


async def test_failures_form_a_streak_that_a_success_ends(store: Store, ns: str) -> None:
    first = await attempt(store, RecordKey(ns, "e1"), denied())
    lost = Settlement(RecordState.UNKNOWN, reason="no answer within read timeout")
    second = await attempt(store, RecordKey(ns, "e2"), lost)
    assert (await store.read_control(ns)).streak == (first, second)

    await attempt(store, RecordKey(ns, "e3"), completed())

    control = await store.read_control(ns)
    assert (control.streak, control.pause, control.version) == ((), None, 0)


async def test_a_settle_not_asked_to_count_leaves_the_streak_alone(store: Store, ns: str) -> None:
    await attempt(store, RecordKey(ns, "e1"), denied(), limit=0)
    assert await store.read_control(ns) == AgentControl()


async def test_the_failure_that_reaches_the_threshold_snapshots_then_pauses(
    store: Store, ns: str
) -> None:
    failed = [await attempt(store, RecordKey(ns, f"e{i}"), denied()) for i in range(LIMIT)]

    control = await store.read_control(ns)
    assert control.pause is not None
    assert (control.pause.origin, control.pause.reason) == (PauseOrigin.AUTO, REASON_401)
    assert control.pause.actor == "idemproxy"
    assert control.pause.since_ms > 0
    assert control.snapshot == control.streak == tuple(failed)
    assert control.version == 1
    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.actor, entry.target) == ("agent.auto_pause", "idemproxy", ns)
    assert (entry.before, entry.after, entry.note) == ("running", "paused", REASON_401)


async def test_the_last_error_is_the_failure_reason_when_there_is_one(
    store: Store, ns: str
) -> None:
    refused = Settlement(RecordState.NOT_APPLIED, reason="cannot connect: refused " + "x" * 300)
    for index in range(LIMIT):
        await attempt(store, RecordKey(ns, f"e{index}"), refused)

    pause = (await store.read_control(ns)).pause
    assert pause is not None
    assert pause.reason.startswith("auto-paused after 3 consecutive failures. Last error: cannot")
    assert len(pause.reason) < 300


async def test_a_paused_agent_claims_nothing_new_but_replays_what_completed(
    store: Store, ns: str
) -> None:
    done = RecordKey(ns, "done")
    await attempt(store, done, completed())
    freed = RecordKey(ns, "freed")
    await attempt(store, freed, Settlement(RecordState.NOT_APPLIED, reason="429"), limit=0)
    for index in range(LIMIT):
        await attempt(store, RecordKey(ns, f"e{index}"), denied())

    fresh = await store.claim(claim_request(RecordKey(ns, "new")))
    assert isinstance(fresh, Paused)
    assert fresh.pause.reason == REASON_401
    assert await store.get(RecordKey(ns, "new")) is None

    again = await store.claim(claim_request(freed))
    assert isinstance(again, Paused)
    record = await store.get(freed)
    assert record is not None
    assert record.state is RecordState.NOT_APPLIED

    replay = await store.claim(claim_request(done))
    assert isinstance(replay, Standing)
    assert replay.record.state is RecordState.COMPLETED


async def test_an_operators_own_effect_passes_the_pause(store: Store, ns: str) -> None:
    for index in range(LIMIT):
        await attempt(store, RecordKey(ns, f"e{index}"), denied())
    result = await store.claim(replace(claim_request(RecordKey(ns, "undo")), ignore_pause=True))
    assert isinstance(result, Claimed)


async def test_failures_while_paused_automatically_join_the_snapshot(store: Store, ns: str) -> None:
    for index in range(LIMIT):
        await attempt(store, RecordKey(ns, f"e{index}"), denied())
    late_key = RecordKey(ns, "late")
    fence = await claim_fence(store, replace(claim_request(late_key), ignore_pause=True))
    lost = Settlement(RecordState.UNKNOWN, reason="lost", pause_after_failures=LIMIT)
    assert await store.settle(late_key, fence, lost)

    control = await store.read_control(ns)
    assert control.snapshot[-1] == FailedAttempt("late", fence)
    assert len(control.snapshot) == LIMIT + 1
    assert control.version == 2
    assert len(await store.read_audit(ns)) == 1  # one pause, one entry


async def test_pause_and_resume_are_compare_and_set(store: Store, ns: str) -> None:
    pause = Pause(PauseOrigin.OPERATOR, "investigating a refund loop", "alice")

    assert (
        await store.write_pause(PauseRequest(ns, 7, pause, operator_audit(ns, "agent.pause")))
        is None
    )
    assert await store.read_control(ns) == AgentControl()
    assert await store.read_audit(ns) == []

    written = await store.write_pause(PauseRequest(ns, 0, pause, operator_audit(ns, "agent.pause")))
    assert written is not None
    assert written.pause is not None
    assert (written.pause.origin, written.pause.reason) == (pause.origin, pause.reason)
    assert written.pause.since_ms > 0
    assert written.version == 1
    assert await store.read_control(ns) == written

    # Two resumes that both saw version 1: one wins, the other changes nothing.
    first, second = await asyncio.gather(
        *(
            store.write_pause(PauseRequest(ns, 1, None, operator_audit(ns, "agent.resume")))
            for _ in range(2)
        )
    )
    assert [first is None, second is None].count(True) == 1
    assert (await store.read_control(ns)).pause is None
    assert [e.action for e in await store.read_audit(ns)] == ["agent.pause", "agent.resume"]


async def test_a_manual_pause_over_an_automatic_one_keeps_its_snapshot(
    store: Store, ns: str
) -> None:
    failed = [await attempt(store, RecordKey(ns, f"e{i}"), denied()) for i in range(LIMIT)]
    manual = Pause(PauseOrigin.OPERATOR, "hands off", "bob")

    written = await store.write_pause(
        PauseRequest(ns, 1, manual, operator_audit(ns, "agent.pause"))
    )

    assert written is not None
    assert written.pause is not None
    assert written.pause.origin is PauseOrigin.OPERATOR
    assert written.snapshot == tuple(failed)
    assert not written.auto_paused


async def test_a_resume_that_resets_empties_streak_and_snapshot(store: Store, ns: str) -> None:
    for index in range(LIMIT):
        await attempt(store, RecordKey(ns, f"e{index}"), denied())

    resumed = await store.write_pause(
        PauseRequest(ns, 1, None, operator_audit(ns, "agent.resume"), reset_failures=True)
    )

    assert resumed == AgentControl(version=2)
    assert await store.read_control(ns) == resumed
    assert isinstance(await store.claim(claim_request(RecordKey(ns, "new"))), Claimed)


async def test_a_lower_threshold_pauses_at_the_next_failure(store: Store, ns: str) -> None:
    for index in range(3):
        await attempt(store, RecordKey(ns, f"e{index}"), denied(), limit=5)
    assert (await store.read_control(ns)).pause is None

    await attempt(store, RecordKey(ns, "e3"), denied(), limit=2)

    pause = (await store.read_control(ns)).pause
    assert pause is not None
    assert pause.reason.startswith("auto-paused after 4 consecutive failures.")


@pytest.mark.parametrize("fence_offset", [0, 1])
async def test_resolve_given_a_fence_applies_only_at_that_fence(
    store: Store, ns: str, fence_offset: int
) -> None:
    key = RecordKey(ns, "e1")
    failed = await attempt(store, key, denied())
    freed = Resolution(RecordState.NOT_APPLIED, reason="freed")

    result = await store.resolve(
        ResolveRequest(key, RecordState.COMPLETED, freed, fence=failed.fence + fence_offset)
    )

    assert isinstance(result, Resolved) is (fence_offset == 0)
    assert result.record is not None
    expected = RecordState.NOT_APPLIED if fence_offset == 0 else RecordState.COMPLETED
    assert result.record.state is expected
