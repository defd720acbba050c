"""The record state machine's decisions (store/records.py), shared by every backend that decides
in Python (memory, SQLite); the Redis scripts follow them in Lua.

Each function decides from the record as it stands and the store's time; the backend then
writes what it returns, with its event, in one atomic step of its own.
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from idemproxy.store.records import (
    ClaimRequest,
    EffectRecord,
    RecordState,
    Resolution,
    Settlement,
)

EXPIRED_LEASE_REASON = "lease expired: the proxy holding this request stopped"

# The expiry of a record that is held: in flight (its outcome is not written yet) or unknown
# (nobody knows whether the effect happened). Such a record outlives every TTL: its expiry would
# free the key, and the next repeat would be sent again. Only an outcome starts the TTL.
HELD_MS = 1 << 62


class ClaimStep(Enum):
    """What a claim does to the record it finds."""

    TAKE = "take"  # none, or a free one the request may take: claim it (unless paused)
    LAPSE = "lapse"  # in flight under a lease that ran out: turn it unknown and report it
    REPLAY = "replay"  # completed, by the same request: report it, with an effect.replayed
    STAND = "stand"  # anything else (in flight, unknown, another request's): report it


def claim_step(record: EffectRecord | None, request: ClaimRequest, now_ms: int) -> ClaimStep:
    """What :meth:`~idemproxy.store.protocols.RecordStore.claim` does with ``record``."""
    if record is None:
        return ClaimStep.TAKE
    if record.state is RecordState.IN_FLIGHT and record.lease_expires_ms <= now_ms:
        return ClaimStep.LAPSE
    same_request = record.fingerprint == request.fingerprint
    if record.state is RecordState.NOT_APPLIED and (same_request or request.reworded_may_reclaim):
        return ClaimStep.TAKE
    # A different fingerprint is refused (the key reused), not replayed.
    if record.state is RecordState.COMPLETED and same_request:
        return ClaimStep.REPLAY
    return ClaimStep.STAND


def expires_ms(state: RecordState, now_ms: int, ttl_s: int) -> int:
    """When a record entering ``state`` now expires: ``ttl_s`` from now, or never if held."""
    if state in (RecordState.IN_FLIGHT, RecordState.UNKNOWN):
        return HELD_MS
    return now_ms + ttl_s * 1000


def holds(record: EffectRecord, fence: int) -> bool:
    """Whether the attempt holding ``fence`` may still settle or renew ``record``: it is in
    flight at that fence, even past its lease (nobody else has taken it over)."""
    return record.state is RecordState.IN_FLIGHT and record.fence == fence


def resolvable(record: EffectRecord, expected: RecordState, fence: int | None) -> bool:
    """Whether a resolve expecting ``expected`` (at ``fence``, if given) may change ``record``."""
    return record.state is expected and fence in (None, record.fence)


def lease_lapsed(record: EffectRecord, now_ms: int) -> EffectRecord:
    """``record``, whose holder let its lease run out, as it stands once that is noticed."""
    return dataclasses.replace(
        record, state=RecordState.UNKNOWN, updated_ms=now_ms, reason=EXPIRED_LEASE_REASON
    )


def claimed_record(
    request: ClaimRequest, previous: EffectRecord | None, fence: int, now_ms: int
) -> EffectRecord:
    """A new attempt's record, holding ``fence``; a freed key taken again keeps its history."""
    return EffectRecord(
        key=request.key,
        state=RecordState.IN_FLIGHT,
        fence=fence,
        fingerprint=request.fingerprint,
        meta=request.meta,
        lease_expires_ms=now_ms + request.lease_ms,
        created_ms=previous.created_ms if previous else now_ms,
        updated_ms=now_ms,
        attempts=(previous.attempts if previous else 0) + 1,
    )


def settled_record(record: EffectRecord, settlement: Settlement, now_ms: int) -> EffectRecord:
    """``record`` once its holder wrote ``settlement``."""
    return dataclasses.replace(
        record,
        state=settlement.state,
        updated_ms=now_ms,
        response=settlement.response,
        external_id=settlement.external_id,
        reason=settlement.reason,
    )


def resolved_record(
    record: EffectRecord, resolution: Resolution, fence: int, now_ms: int
) -> EffectRecord:
    """``record`` after ``resolution``, at the new ``fence``."""
    return dataclasses.replace(
        record,
        state=resolution.state,
        fence=fence,
        lease_expires_ms=0,
        updated_ms=now_ms,
        response=resolution.response,
        external_id=resolution.external_id,
        reason=resolution.reason,
    )
