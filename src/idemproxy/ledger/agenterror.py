"""Whether an agent is in error, worked out from what the store holds (no state of its own).

An agent is in error, for the first of these that holds::

    paused           its pause (an operator's or the automatic one): since the pause's since_ms
    unknown_outcome  an effect awaits review (a lapsed lease: the agent or its proxy died, or an
                     upstream that never answered): since the oldest turned unknown
    failed           its failure streak holds an effect that still replays an error status
                     (a repeat gets the failure again): since the first such failed

Each names the batch concerned, the recovery strategy of that batch (ledger/progress.py) and the
command that recovers. Recovery clears it by itself: resolving the unknown outcomes, resuming the
agent, freeing the failed effects (``review retry``, ``recover``) or a later success.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from idemproxy.ledger import documents
from idemproxy.ledger.documents import Document
from idemproxy.ledger.progress import RecoveryStrategy, batch_progress
from idemproxy.store.control import AgentControl
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectRecord, RecordKey, RecordState


class ErrorReason(StrEnum):
    PAUSED = "paused"
    UNKNOWN_OUTCOME = "unknown_outcome"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class AgentError:
    """Why the agent is in error, for which batch, since when (store clock) and what recovers."""

    agent: str
    reason: ErrorReason
    detail: str  # the pause's reason, the record's reason or the upstream's status
    batch: str  # "" when no one batch is concerned (an operator's pause)
    effect_key: str  # the effect that caused it ("" for an operator's pause)
    since_ms: int
    strategy: RecoveryStrategy | None  # the batch's, None without a batch
    hint: str


async def agent_error(store: Store, agent: str) -> AgentError | None:
    """The agent's error, or None while it is not in error."""
    control = await store.read_control(agent)
    if control.pause is not None:
        return await _paused(store, agent, control)
    unknown = await store.list_unknown(agent, 1)
    if unknown:
        record = unknown[0]
        hint = (
            f"say whether it happened: `idemproxy review resolve {record.key} --as"
            f" applied|not-applied`, then re-run the batch or `idemproxy recover {agent}"
            f" {record.meta.batch}`"
        )
        return await _error(store, record, ErrorReason.UNKNOWN_OUTCOME, record.reason, hint)
    failed = await _first_failed(store, agent, control)
    if failed is not None:
        status = failed.status
        hint = (
            f"fix the cause, then free it: `idemproxy review retry {failed.key}` (or"
            f" `idemproxy recover {agent} {failed.meta.batch}`) and re-run the batch"
        )
        detail = failed.reason or f"upstream answered {status}"
        return await _error(store, failed, ErrorReason.FAILED, detail, hint)
    return None


async def _paused(store: Store, agent: str, control: AgentControl) -> AgentError:
    assert control.pause is not None
    pause = control.pause
    hint = f"fix the cause, then `idemproxy agent resume {agent}`"
    record = None
    if control.snapshot:  # the automatic pause: the failure that made it names the batch
        record = await store.get(RecordKey(agent, control.snapshot[-1].effect_id))
    batch = record.meta.batch if record is not None else ""
    return AgentError(
        agent=agent,
        reason=ErrorReason.PAUSED,
        detail=pause.reason,
        batch=batch,
        effect_key=str(record.key) if record is not None else "",
        since_ms=pause.since_ms,
        strategy=await _strategy(store, agent, batch),
        hint=hint,
    )


async def _first_failed(store: Store, agent: str, control: AgentControl) -> EffectRecord | None:
    """The oldest attempt of the streak whose record still replays its error status."""
    for attempt in control.streak:
        record = await store.get(RecordKey(agent, attempt.effect_id))
        if (
            record is not None
            and record.fence == attempt.fence
            and record.state is RecordState.COMPLETED
            and record.failed
        ):
            return record
    return None


async def _error(
    store: Store, record: EffectRecord, reason: ErrorReason, detail: str, hint: str
) -> AgentError:
    agent, batch = record.key.agent, record.meta.batch
    return AgentError(
        agent=agent,
        reason=reason,
        detail=detail,
        batch=batch,
        effect_key=str(record.key),
        since_ms=record.updated_ms,
        strategy=await _strategy(store, agent, batch),
        hint=hint,
    )


async def _strategy(store: Store, agent: str, batch: str) -> RecoveryStrategy | None:
    if not batch:
        return None
    if await store.read_archive(agent, batch) is not None:
        return RecoveryStrategy.ABANDON
    return batch_progress(agent, batch, await store.batch_records(agent, batch), None).strategy


def error_document(error: AgentError | None, now_ms: int) -> Document | None:
    """The error as the admin API and ``--json`` give it, with how long it has lasted."""
    if error is None:
        return None
    document = documents.value(error)
    del document["agent"]  # it sits in the agent's own document
    document["seconds"] = max(0, now_ms - error.since_ms) / 1000
    return document


async def error_of(store: Store, agent: str) -> Document | None:
    """The agent's error document, None while it is not in error."""
    return error_document(await agent_error(store, agent), await store.now_ms())
