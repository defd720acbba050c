"""Recovering a stuck batch: its progress, and the recovery an operator chooses (SPEC 6).

The proxy does not re-run a batch: the agent (or its runtime) does, through the proxy, which
replays what completed and sends only the rest. Recovery prepares that re-run and records the
decision:

- ``auto``: the strategy the records call for. ``restart_batch`` and ``selective`` free the
  batch's recorded failures and clear them with its freed (``not_applied``) records, so that
  the re-run sends them afresh even if its request differs (``restart_batch`` frees the
  compensated effects too); ``manual_only`` is refused until the unknown outcomes are resolved.
- ``restart``: re-run it all: every failure and every compensated effect is freed and cleared.
- ``restart_from_last_external``: the re-run resumes at the tool call after the batch's last
  completed effect: everything up to it replays as the agent first saw it, the failures and
  freed effects after it are cleared (ledger/freeing.py says which records each mode frees).
- ``abandon``: archive the batch's records as they stand, then clear the freed ones. Completed
  effects are never deleted (a later re-run still replays them) and unknown outcomes stay in
  review: only a human can say whether they happened. Abandoning is final: no recovery runs on
  an abandoned batch afterwards, so its archive is never overwritten.

Every recovery is refused while an effect of the batch is being sent, is rate limited per
agent and is written to the audit log in the same step as its changes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

import orjson

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger import documents
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.ledger.freeing import Scope, free, to_free
from idemproxy.ledger.progress import Abandonment, BatchProgress, RecoveryStrategy, batch_progress
from idemproxy.ledger.review import not_found
from idemproxy.store.clock import wall_ms
from idemproxy.store.journal import AuditEntry, ClearRequest
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectRecord

log = logging.getLogger(__name__)


class RecoverMode(StrEnum):
    AUTO = "auto"
    RESTART = "restart"
    RESTART_FROM_LAST_EXTERNAL = "restart_from_last_external"
    ABANDON = "abandon"

    @classmethod
    def parse(cls, text: str) -> RecoverMode:
        """``auto``, ``restart``, ``restart_from_last_external`` (or with dashes) or
        ``abandon``."""
        try:
            return cls(text.replace("-", "_"))
        except ValueError:
            raise RequestRefused(
                ProblemCode.INVALID_REQUEST,
                f"{text!r} is not a recovery strategy; use auto, restart,"
                " restart-from-last-external or abandon",
            ) from None

    def scope(self, strategy: RecoveryStrategy) -> Scope:
        """What this mode frees for the re-run of a batch whose strategy is ``strategy``."""
        if self is RecoverMode.ABANDON:
            return Scope.NOTHING_RECORDED
        if self is RecoverMode.RESTART_FROM_LAST_EXTERNAL:
            return Scope.AFTER_LAST_EXTERNAL
        if self is RecoverMode.RESTART or strategy is RecoveryStrategy.RESTART_BATCH:
            return Scope.EVERYTHING
        return Scope.FAILURES


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """What a recovery did, and what a re-run of the batch will do."""

    agent: str
    batch: str
    mode: RecoverMode
    strategy: RecoveryStrategy  # the batch's strategy once the recovery is done
    replay: tuple[str, ...]  # tool calls whose completed effects a re-run gets replayed
    cleared: tuple[str, ...]  # freed effect keys deleted: a re-run sends them afresh
    review: tuple[str, ...]  # effect keys still waiting for a decision
    archived: bool
    next_step: str
    skip: tuple[str, ...] = ()  # tool calls a re-run gets answered from their records
    resume_from: str = ""  # the first tool call the re-run sends ("" : after those in skip)
    compensated: tuple[str, ...] = ()  # effect keys undone: a repeat gets effect-compensated


class Recovery:
    def __init__(self, store: Store, limit: ActionLimit) -> None:
        self._store = store
        self._limit = limit

    async def progress(self, agent: str, batch: str) -> BatchProgress:
        """The batch's progress; 404 if the store knows nothing of it."""
        progress, _ = await self._load(agent, batch)
        return progress

    async def _load(
        self, agent: str, batch: str, cleared: bool = False
    ) -> tuple[BatchProgress, list[EffectRecord]]:
        """``cleared``: the batch was just cleared, so no records left is no surprise."""
        records = await self._store.batch_records(agent, batch)
        archive = await self._store.read_archive(agent, batch)
        outcomes = await self._store.read_outcomes(agent, batch)
        if not records and archive is None and not outcomes and not cleared:
            if agent not in await self._store.list_agents():
                raise not_found(f"agent {agent!r}")
            raise not_found(f"batch {batch!r} of agent {agent!r}")
        abandoned = _abandonment(archive) if archive is not None else None
        return batch_progress(agent, batch, records, abandoned, outcomes), records

    async def recover(
        self, agent: str, batch: str, mode: RecoverMode, actor: str, note: str = ""
    ) -> RecoveryPlan:
        await self._limit.check(agent)
        progress, records = await self._load(agent, batch)
        _refuse_unsafe(progress, mode)
        chosen = to_free(records, mode.scope(progress.strategy))
        freed = await free(self._store, chosen, actor, note)
        archive = None
        if mode is RecoverMode.ABANDON:
            archive = orjson.dumps(
                {
                    "actor": actor,
                    "abandoned_ms": wall_ms(),
                    "note": note,
                    "progress": documents.value(progress),
                }
            )
        done = f"{len(freed)} freed record(s) cleared" + (", archived" if archive else "")
        if mode is RecoverMode.AUTO:
            # What auto did is the strategy it picked: the log and the audit name that one.
            done = f"auto picked {progress.strategy}: {done}"
        audit = AuditEntry(
            agent=agent,
            action=AuditAction.ABANDON if archive else AuditAction.RESTART,
            actor=actor,
            target=batch,
            before=_summary(progress),
            after=done,
            note=note,
        )
        cleared = await self._store.clear_batch(ClearRequest(agent, batch, freed, archive, audit))
        log.info(
            "batch recovered: %s (%s)",
            progress.strategy if mode is RecoverMode.AUTO else mode,
            done,
            extra={"agent": agent, "batch": batch, "actor": actor},
        )
        if archive is not None:  # the store sent batch.abandoned in the same step
            log.warning(
                "batch abandoned",
                extra={"agent": agent, "batch": batch, "actor": actor, "note": note},
            )
        after, _ = await self._load(agent, batch, cleared=True)
        resumes = [r.meta.tool_call for r in _by_claim(records) if r.key.effect_id in cleared]
        resume_from = resumes[0] if resumes else after.resume_from
        return RecoveryPlan(
            agent=agent,
            batch=batch,
            mode=mode,
            strategy=after.strategy,
            replay=after.replay,
            cleared=tuple(f"{agent}/{effect_id}" for effect_id in cleared),
            review=tuple(action.effect_key for action in after.unknown),
            archived=archive is not None,
            next_step=_next_step(after),
            skip=tuple(call for call in after.skip if call not in resumes),
            resume_from=resume_from,
            compensated=tuple(action.effect_key for action in after.compensated),
        )


def _by_claim(records: list[EffectRecord]) -> list[EffectRecord]:
    return sorted(records, key=lambda record: (record.created_ms, str(record.key)))


def _refuse_unsafe(progress: BatchProgress, mode: RecoverMode) -> None:
    """Raise ``state-conflict`` when the batch cannot be recovered this way now."""
    if progress.pending:
        calls = ", ".join(action.tool_call for action in progress.pending)
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"tool call(s) {calls} are being sent right now; wait until they finish (or their"
            " lease runs out and they join the review queue), then recover",
            extra={"strategy": progress.strategy.value},
        )
    if progress.abandoned is not None:
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"this batch was abandoned by {progress.abandoned.actor}, and that is final here: its"
            " archive keeps what it did. An agent that re-runs it anyway still gets its"
            " completed effects replayed",
            extra={"strategy": progress.strategy.value},
        )
    if mode is RecoverMode.ABANDON:
        return
    if progress.unknown:
        keys = [action.effect_key for action in progress.unknown]
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"{len(keys)} effect(s) of this batch have an unknown outcome, so a re-run would stop"
            " at them: resolve each with `idemproxy review resolve KEY --as applied|not-applied`"
            " first, or abandon the batch",
            extra={"strategy": progress.strategy.value, "review": keys},
        )


def _abandonment(archive: bytes) -> Abandonment:
    document = orjson.loads(archive)
    return Abandonment(
        actor=document["actor"], abandoned_ms=document["abandoned_ms"], note=document["note"]
    )


def _summary(progress: BatchProgress) -> str:
    return (
        f"{progress.strategy.value}: {len(progress.completed)} completed,"
        f" {len(progress.failed)} failed, {len(progress.pending)} pending,"
        f" {len(progress.unknown)} unknown"
    )


def _next_step(progress: BatchProgress) -> str:
    if progress.expired and progress.strategy is not RecoveryStrategy.ABANDON:
        calls = ", ".join(progress.expired)
        return (
            f"do not re-run tool call(s) {calls}: their records expired (the archive shows what"
            " they did), so a re-run would send them again; re-run only the rest, with the same"
            " Idem-Batch and Idem-Tool-Call ids"
        )
    if progress.strategy is RecoveryStrategy.ABANDON:
        return "nothing: the batch is archived; do not re-run it unless you mean to"
    if progress.strategy is RecoveryStrategy.SELECTIVE:
        step = (
            "re-run the whole batch through the proxy with the same Idem-Batch and Idem-Tool-Call"
            " ids: the tool calls listed under replay get their recorded responses, the rest are"
            " sent"
        )
        if progress.compensated:
            step += (
                f"; {len(progress.compensated)} compensated effect(s) are refused (409"
                " effect-compensated), not sent again"
            )
        return step
    if progress.compensated:
        return (
            "re-run the whole batch through the proxy: every effect that completed was undone"
            " by its compensation, and a repeat of one is refused (409 effect-compensated) until"
            " a restart frees it"
        )
    return "re-run the whole batch through the proxy: nothing external completed"
