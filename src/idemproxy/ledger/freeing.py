"""Which records of a batch a recovery frees for the re-run, and freeing the recorded ones.

A re-run replays every ``completed`` record, failures included, so a batch whose only effect
got a 401 would get the 401 again. A recovery that means the re-run to send an effect again
therefore frees it first: compare-and-set from ``completed`` to ``not_applied`` on the fence it
was read at (as ``idemproxy review retry`` does, audited as ``review.retry``), after which it is
cleared with the freed ones. Which records that is depends on the mode:

- ``restart`` (and ``auto`` when the strategy is ``restart_batch``): every failure and every
  compensated effect, with its compensation. The batch starts over: what failed and what was
  undone is sent afresh (and a later compensation undoes the new effect, not "already undone").
- ``auto`` on ``selective``: every failure. Compensated effects stay undone.
- ``restart_from_last_external``: only what comes after the batch's last effect that completed
  and stands. Everything up to it (failures too) replays as the agent first saw it, so a
  re-run reaches that point as it did before and resumes at the next tool call.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from idemproxy.ledger.audit import AuditAction
from idemproxy.ledger.compensated import compensated_by
from idemproxy.ledger.compensator import is_compensation
from idemproxy.ledger.review import RESOLVED_TTL_S
from idemproxy.store.journal import AuditEntry, ClearedRecord
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EffectRecord,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
)


class Scope(StrEnum):
    """What a recovery frees."""

    NOTHING_RECORDED = "nothing_recorded"  # only the freed (not_applied) records
    FAILURES = "failures"  # and the recorded failures
    EVERYTHING = "everything"  # and the compensated effects
    AFTER_LAST_EXTERNAL = "after_last_external"  # failures and freed after the last success


def succeeded(record: EffectRecord) -> bool:
    """Completed with a success that stands (not undone by a compensation)."""
    completed = record.state is RecordState.COMPLETED
    return completed and not record.failed and not compensated_by(record)


def _failed(record: EffectRecord) -> bool:
    return record.failed and not compensated_by(record)


def last_external(records: Sequence[EffectRecord]) -> EffectRecord | None:
    """The batch's last effect (by claim) that completed and stands; None if there is none."""
    standing = [r for r in records if succeeded(r) and not is_compensation(r)]
    return max(standing, key=lambda r: (r.created_ms, str(r.key)), default=None)


def to_free(records: Sequence[EffectRecord], scope: Scope) -> list[EffectRecord]:
    """The records ``scope`` frees: freed ones, and recorded ones to free first."""
    own = [record for record in records if not is_compensation(record)]
    if scope is Scope.AFTER_LAST_EXTERNAL:
        last = last_external(own)
        if last is not None:
            after = (last.created_ms, str(last.key))
            own = [r for r in own if (r.created_ms, str(r.key)) > after]
    chosen = [record for record in own if record.state is RecordState.NOT_APPLIED]
    if scope is not Scope.NOTHING_RECORDED:
        chosen += [record for record in own if _failed(record)]
    if scope is Scope.EVERYTHING:
        undone = [record for record in own if compensated_by(record)]
        # Their compensations go too: the effect sent again is undone anew, not "already undone".
        undoing = {compensated_by(record) for record in undone}
        chosen += undone + [r for r in records if str(r.key) in undoing and succeeded(r)]
    freed_ones = [r for r in records if r.state is RecordState.NOT_APPLIED and is_compensation(r)]
    return chosen + freed_ones  # a freed compensation is cleared as before


async def free(
    store: Store, records: Sequence[EffectRecord], actor: str, note: str
) -> list[ClearedRecord]:
    """Free the recorded ones among ``records``; every one now freed, at its fence, to clear.

    A record that moved on since it was read (another attempt, an operator) is left alone."""
    cleared: list[ClearedRecord] = []
    for record in records:
        if record.state is RecordState.NOT_APPLIED:
            cleared.append(ClearedRecord(record.key.effect_id, record.fence))
            continue
        status = record.status
        was = "compensated" if compensated_by(record) else f"completed ({status})"
        audit = AuditEntry(
            record.key.agent, AuditAction.RETRY, actor, str(record.key), was, "not_applied", note
        )
        reason = f"freed by {actor} to be sent again on the batch's re-run"
        resolution = Resolution(RecordState.NOT_APPLIED, reason=reason, ttl_s=RESOLVED_TTL_S)
        result = await store.resolve(
            ResolveRequest(record.key, RecordState.COMPLETED, resolution, audit, record.fence)
        )
        if isinstance(result, Resolved):
            cleared.append(ClearedRecord(record.key.effect_id, result.record.fence))
    return cleared
