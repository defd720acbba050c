"""Batch progress and the recovery strategy it calls for (SPEC 6), computed from the records.

A record's state says where its effect stands::

    completed, succeeded      completed action (its external id, if the route names one)
    completed, failed         failed action (an error status, or an MCP tool's error), not
                              retryable: a repeat replays the failure
    completed, compensated    compensated: undone by its compensation; a repeat gets a 409
    not_applied               failed action, retryable: a repeat is forwarded again
    in_flight                 pending: an attempt holds the key now
    unknown                   unknown outcome: waits for review, never re-sent

A record that expired (its route's ``ttl_s`` passed) is gone, but its outcome stays in the
batch's archive of outcomes (store/outcomes.py) for the archive retention: it is listed the
same way, marked ``archived``. A re-run sends an archived effect again, as a new one: nothing is
left to replay, so its tool call is listed under ``expired`` instead of ``replay``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from idemproxy.ledger.compensated import compensated_by
from idemproxy.ledger.compensator import TOOL_CALL_PREFIX, is_compensation
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.records import EffectRecord, RecordState


class RecoveryStrategy(StrEnum):
    RESTART_BATCH = "restart_batch"  # nothing external completed (or stands): re-run it all
    SELECTIVE = "selective"  # re-run is safe: completed effects replay
    MANUAL_ONLY = "manual_only"  # unknown outcomes need a human first
    ABANDON = "abandon"  # an operator archived the batch


@dataclass(frozen=True, slots=True)
class BatchAction:
    """One effect of a batch, as an operator or an agent runtime needs to see it."""

    effect_key: str
    tool_call: str
    action: str
    upstream: str
    method: str
    path: str
    state: RecordState
    status: int = 0
    external_id: str = ""
    reason: str = ""
    retryable: bool = False
    attempts: int = 0
    updated_ms: int = 0
    lease_expires_ms: int = 0
    archived: bool = False  # the record expired: this is its outcome as the archive keeps it
    compensated_by: str = ""  # the compensation that undid it
    # Completed with an answer that reports a failure: an error status, or an MCP tool's error
    # (EffectRecord.failed); a repeat replays it.
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Abandonment:
    """Who archived a batch, when and why."""

    actor: str
    abandoned_ms: int
    note: str = ""


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """What a batch already did, in the shape an agent runtime resumes from."""

    agent: str
    batch: str
    completed: tuple[BatchAction, ...]
    failed: tuple[BatchAction, ...]
    pending: tuple[BatchAction, ...]
    unknown: tuple[BatchAction, ...]
    strategy: RecoveryStrategy
    replay: tuple[str, ...]  # tool calls whose effects a re-run gets replayed, not re-sent
    abandoned: Abandonment | None = None
    # Tool calls whose completed effects expired: a re-run would send them again.
    expired: tuple[str, ...] = ()
    compensated: tuple[BatchAction, ...] = ()  # undone by their compensations
    # Tool calls, in the order they were first claimed, that a re-run gets answered from their
    # records (replayed, or refused as compensated) without sending anything...
    skip: tuple[str, ...] = ()
    # ...and the first tool call whose effect a re-run sends ("" if none: it sends anew from
    # the first tool call after those recorded).
    resume_from: str = ""


def batch_action(record: EffectRecord) -> BatchAction:
    status = record.status
    return BatchAction(
        effect_key=str(record.key),
        tool_call=record.meta.tool_call,
        action=record.meta.action,
        upstream=record.meta.upstream,
        method=record.meta.method,
        path=record.meta.path,
        state=record.state,
        status=status,
        external_id=record.external_id,
        reason=record.reason,
        failed=record.failed,
        retryable=record.state is RecordState.NOT_APPLIED,
        attempts=record.attempts,
        updated_ms=record.updated_ms,
        lease_expires_ms=record.lease_expires_ms if record.state is RecordState.IN_FLIGHT else 0,
        compensated_by=compensated_by(record),
    )


def archived_action(agent: str, outcome: ArchivedOutcome) -> BatchAction:
    """An expired effect, from its archived outcome: a repeat of it is sent again."""
    return BatchAction(
        effect_key=f"{agent}/{outcome.effect_id}",
        tool_call=outcome.tool_call,
        action=outcome.action,
        upstream=outcome.upstream,
        method=outcome.method,
        path=outcome.path,
        state=outcome.state,
        status=outcome.status,
        external_id=outcome.external_id,
        reason=outcome.reason,
        # The archive keeps the status alone: an MCP tool's error shows as the 200 it came with.
        failed=outcome.state is RecordState.COMPLETED and outcome.status >= 400,
        retryable=outcome.state is RecordState.NOT_APPLIED or outcome.status >= 400,
        attempts=outcome.attempts,
        updated_ms=outcome.updated_ms,
        archived=True,
    )


def batch_progress(
    agent: str,
    batch: str,
    records: Iterable[EffectRecord],
    abandoned: Abandonment | None,
    archived: Iterable[ArchivedOutcome] = (),
) -> BatchProgress:
    """Sort the batch's records, and the archived outcomes of those that expired, into
    progress and pick the strategy of SPEC 6."""
    completed: list[BatchAction] = []
    failed: list[BatchAction] = []
    pending: list[BatchAction] = []
    unknown: list[BatchAction] = []
    compensated: list[BatchAction] = []
    records = list(records)
    live = {record.key.effect_id for record in records}
    actions = [batch_action(record) for record in records]
    actions += [archived_action(agent, o) for o in archived if o.effect_id not in live]
    for action in actions:
        if action.state is RecordState.IN_FLIGHT:
            pending.append(action)
        elif action.state is RecordState.UNKNOWN:
            unknown.append(action)
        elif action.compensated_by:
            compensated.append(action)
        elif action.state is RecordState.NOT_APPLIED or action.failed:
            failed.append(action)
        else:
            completed.append(action)
    # The operator's compensations are listed like any effect, but the agent never sends them:
    # they neither make a batch selective nor are they in what its re-run replays.
    own = [action for action in completed if not action.tool_call.startswith(TOOL_CALL_PREFIX)]
    replay = tuple(dict.fromkeys(a.tool_call for a in own if not a.archived))
    expired = tuple(
        dict.fromkeys(a.tool_call for a in own if a.archived and a.tool_call not in replay)
    )
    if abandoned is not None:
        strategy = RecoveryStrategy.ABANDON
    elif unknown:
        strategy = RecoveryStrategy.MANUAL_ONLY
    elif own:  # compensated effects no longer stand: a batch of only those restarts
        strategy = RecoveryStrategy.SELECTIVE
    else:
        strategy = RecoveryStrategy.RESTART_BATCH
    return BatchProgress(
        agent=agent,
        batch=batch,
        completed=tuple(completed),
        failed=tuple(failed),
        pending=tuple(pending),
        unknown=tuple(unknown),
        strategy=strategy,
        replay=replay,
        abandoned=abandoned,
        expired=expired,
        compensated=tuple(compensated),
        skip=answered_tool_calls(records),
        resume_from=first_sent_tool_call(records),
    )


def _in_order(records: Iterable[EffectRecord]) -> dict[str, list[EffectRecord]]:
    """The records by tool call, tool calls in the order they were first claimed."""
    ordered = sorted(
        (record for record in records if not is_compensation(record)),
        key=lambda record: (record.created_ms, str(record.key)),
    )
    calls: dict[str, list[EffectRecord]] = {}
    for record in ordered:
        calls.setdefault(record.meta.tool_call, []).append(record)
    return calls


def answered_tool_calls(records: Iterable[EffectRecord]) -> tuple[str, ...]:
    """Tool calls every effect of which a re-run gets answered from its completed record."""
    return tuple(
        call
        for call, effects in _in_order(records).items()
        if all(record.state is RecordState.COMPLETED for record in effects)
    )


def first_sent_tool_call(records: Iterable[EffectRecord]) -> str:
    """The first tool call with an effect a re-run sends again (a freed one), or ""."""
    for call, effects in _in_order(records).items():
        if any(record.state is RecordState.NOT_APPLIED for record in effects):
            return call
    return ""
