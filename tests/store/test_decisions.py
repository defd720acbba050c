"""The claim decision every Python backend shares, read as the state machine's table."""

from __future__ import annotations

import dataclasses

import pytest

from idemproxy.store.decisions import (
    HELD_MS,
    ClaimStep,
    claim_step,
    expires_ms,
    holds,
    lease_lapsed,
    resolvable,
)
from idemproxy.store.records import (
    ClaimRequest,
    EffectMeta,
    EffectRecord,
    RecordKey,
    RecordState,
)

NOW_MS = 1_000_000
KEY = RecordKey("agent", "e1")


def request(fingerprint: str = "fp", *, reworded_may_reclaim: bool = False) -> ClaimRequest:
    return ClaimRequest(
        KEY, fingerprint, EffectMeta(), 5_000, 600, reworded_may_reclaim=reworded_may_reclaim
    )


def record(state: RecordState, *, lease_left_ms: int = 1, fingerprint: str = "fp") -> EffectRecord:
    return EffectRecord(
        KEY, state, 3, fingerprint, EffectMeta(), lease_expires_ms=NOW_MS + lease_left_ms
    )


@pytest.mark.parametrize(
    ("found", "claim", "step"),
    [
        (None, request(), ClaimStep.TAKE),
        (record(RecordState.IN_FLIGHT), request(), ClaimStep.STAND),
        (record(RecordState.IN_FLIGHT, lease_left_ms=0), request(), ClaimStep.LAPSE),
        (record(RecordState.COMPLETED), request(), ClaimStep.REPLAY),
        (record(RecordState.COMPLETED), request("other"), ClaimStep.STAND),
        (record(RecordState.UNKNOWN), request(), ClaimStep.STAND),
        (record(RecordState.NOT_APPLIED), request(), ClaimStep.TAKE),
        (record(RecordState.NOT_APPLIED), request("other"), ClaimStep.STAND),
        (
            record(RecordState.NOT_APPLIED),
            request("other", reworded_may_reclaim=True),
            ClaimStep.TAKE,
        ),
        (
            record(RecordState.COMPLETED),
            request("other", reworded_may_reclaim=True),
            ClaimStep.STAND,
        ),
    ],
)
def test_a_claim_steps_as_the_state_machine_says(
    found: EffectRecord | None, claim: ClaimRequest, step: ClaimStep
) -> None:
    assert claim_step(found, claim, NOW_MS) is step


def test_only_an_outcome_starts_the_ttl() -> None:
    assert expires_ms(RecordState.IN_FLIGHT, NOW_MS, 600) == HELD_MS
    assert expires_ms(RecordState.UNKNOWN, NOW_MS, 600) == HELD_MS
    assert expires_ms(RecordState.COMPLETED, NOW_MS, 600) == NOW_MS + 600_000


def test_only_the_fence_in_flight_holds_the_record_even_past_its_lease() -> None:
    lapsed = record(RecordState.IN_FLIGHT, lease_left_ms=-10)
    assert holds(lapsed, 3)
    assert not holds(lapsed, 2)
    assert not holds(lease_lapsed(lapsed, NOW_MS), 3)


def test_a_resolve_needs_the_expected_state_and_any_given_fence() -> None:
    unknown = record(RecordState.UNKNOWN)
    assert resolvable(unknown, RecordState.UNKNOWN, None)
    assert resolvable(unknown, RecordState.UNKNOWN, 3)
    assert not resolvable(unknown, RecordState.UNKNOWN, 2)
    assert not resolvable(dataclasses.replace(unknown, fence=4), RecordState.COMPLETED, 4)
