"""Pausing an agent, and resuming it once the cause of its failures is fixed ("mark fixed").

The proxy pauses an agent by itself after ``recovery.pause_after_failures`` consecutive failed
effects, having first kept those failed attempts in a snapshot (store/control.py). An operator
can pause an agent too. Resuming is compare-and-set on the control's version:

1. each snapshotted attempt is freed (its record turned ``not_applied``, so the agent's re-run
   is sent to the upstream instead of replaying the old failure) only while it is still the
   latest attempt of its key and still failed; one that moved on is skipped, and an unknown
   outcome stays in review;
2. then the pause is cleared, the streak and snapshot emptied, if the control is still at the
   version read. A pause someone set meanwhile (an operator's, or a new automatic one) stands.

A single failed effect is freed the same way by ``idemproxy review retry KEY``. Every step is
written to the audit log, and each is rate limited like other recovery actions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.ledger.review import RESOLVED_TTL_S, not_found
from idemproxy.store.control import AgentControl, Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EffectRecord,
    RecordKey,
    RecordState,
    Refused,
    Resolution,
    ResolveRequest,
)

log = logging.getLogger(__name__)

# A resume whose compare-and-set lost only to failures joining the snapshot goes round again.
RESUME_ROUNDS = 3


class Freed(StrEnum):
    """What freeing one failed attempt found."""

    FREED = "freed"  # was failed at that attempt: now free, the re-run is sent
    ALREADY_FREE = "already_free"  # nothing was applied: the re-run is sent anyway
    MOVED_ON = "moved_on"  # another attempt or a decision came since: left as it is
    UNKNOWN = "unknown"  # the outcome is unknown: it waits in review
    GONE = "gone"  # the record expired


@dataclass(frozen=True, slots=True)
class FreedAttempt:
    effect_key: str
    fence: int
    result: Freed
    state: str  # the record's state now ("" when gone)


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """An agent's pause and failures, and what a resume would free now."""

    agent: str
    state: str  # running or paused
    paused_by: str  # auto, operator, or "" while running
    reason: str
    actor: str
    since_ms: int
    failures: int  # consecutive failures since the last success or resume
    snapshot: tuple[FreedAttempt, ...]  # for a status: what a resume would find


@dataclass(frozen=True, slots=True)
class Resumed:
    agent: str
    freed: tuple[FreedAttempt, ...]
    next_step: str


def _describe(pause: Pause | None) -> str:
    if pause is None:
        return "running"
    return f"paused ({pause.origin}) by {pause.actor}: {pause.reason}"


class Pauses:
    def __init__(self, store: Store, limit: ActionLimit) -> None:
        self._store = store
        self._limit = limit

    async def status(self, agent: str) -> AgentStatus:
        control = await self._store.read_control(agent)
        preview = [
            await self._free(RecordKey(agent, attempt.effect_id), attempt.fence, None)
            for attempt in control.snapshot
        ]
        pause = control.pause
        return AgentStatus(
            agent=agent,
            state="paused" if pause else "running",
            paused_by=pause.origin.value if pause else "",
            reason=pause.reason if pause else "",
            actor=pause.actor if pause else "",
            since_ms=pause.since_ms if pause else 0,
            failures=control.failures,
            snapshot=tuple(preview),
        )

    async def pause(self, agent: str, actor: str, note: str) -> AgentStatus:
        """Pause the agent by hand; over an automatic pause it keeps that pause's snapshot."""
        await self._limit.check(agent)
        control = await self._store.read_control(agent)
        if control.pause is not None and control.pause.origin is PauseOrigin.OPERATOR:
            raise _conflict(f"agent {agent!r} is already {_describe(control.pause)}", control)
        reason = note or f"paused by {actor}"
        before = _describe(control.pause)
        audit = AuditEntry(agent, AuditAction.PAUSE, actor, agent, before, "paused", note)
        pause = Pause(PauseOrigin.OPERATOR, reason, actor)
        written = await self._store.write_pause(PauseRequest(agent, control.version, pause, audit))
        if written is None:
            raise _conflict(f"agent {agent!r} changed while pausing it; look again and retry")
        log.warning("agent paused", extra={"agent": agent, "actor": actor, "reason": reason})
        return await self.status(agent)

    async def resume(self, agent: str, actor: str, note: str) -> Resumed:
        """Free the snapshot's failed attempts, then clear the pause (compare-and-set)."""
        await self._limit.check(agent)
        control = await self._store.read_control(agent)
        if control.pause is None:
            raise _conflict(
                f"agent {agent!r} is not paused, so there is nothing to resume; `idemproxy agent"
                f" status {agent}` shows its failures",
                control,
            )
        freed: list[FreedAttempt] = []
        for _ in range(RESUME_ROUNDS):
            assert control.pause is not None
            done = {(item.effect_key, item.fence) for item in freed}
            for attempt in control.snapshot:
                key = RecordKey(agent, attempt.effect_id)
                if (str(key), attempt.fence) not in done:
                    freed.append(await self._free(key, attempt.fence, (actor, note)))
            counts = ", ".join(f"{sum(f.result is r for f in freed)} {r}" for r in Freed)
            before, after = _describe(control.pause), f"running; snapshot: {counts}"
            audit = AuditEntry(agent, AuditAction.RESUME, actor, agent, before, after, note)
            written = await self._store.write_pause(
                PauseRequest(agent, control.version, None, audit, reset_failures=True)
            )
            if written is not None:
                log.info("agent resumed", extra={"agent": agent, "actor": actor, "after": after})
                return Resumed(agent, tuple(freed), _next_step(freed))
            now = await self._store.read_control(agent)
            if not _same_pause(now.pause, control.pause):
                raise _lost(agent, now, freed)
            control = now  # only failures joined the snapshot: free them too
        raise _conflict(f"agent {agent!r} kept changing while resuming it; retry")

    async def retry(self, key: RecordKey, actor: str, note: str) -> EffectRecord:
        """Free one failed effect, so that its next request is sent again."""
        await self._limit.check(key.agent)
        result = await self._free(key, None, (actor, note))
        record = await self._store.get(key)
        if result.result is Freed.FREED and record is not None:
            return record
        if record is None:
            raise not_found(f"effect {key}")
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            _retry_refusal(key, record),
            extra={"state": record.state.value},
        )

    async def _free(
        self, key: RecordKey, fence: int | None, acting: tuple[str, str] | None
    ) -> FreedAttempt:
        """Free the record if it is failed (and at ``fence``); ``acting`` None only looks."""
        record = await self._store.get(key)
        wanted = fence if fence is not None else record.fence if record else 0
        result = _freeable(record, wanted)
        if result is not Freed.FREED or acting is None or record is None:
            state = record.state.value if record else ""
            return FreedAttempt(str(key), wanted, result, state)
        actor, note = acting
        before, after = f"failed ({_status(record)})", RecordState.NOT_APPLIED.value
        audit = AuditEntry(key.agent, AuditAction.RETRY, actor, str(key), before, after, note)
        reason = f"freed by {actor} to be sent again" + (f": {note}" if note else "")
        resolution = Resolution(RecordState.NOT_APPLIED, reason=reason, ttl_s=RESOLVED_TTL_S)
        resolved = await self._store.resolve(
            ResolveRequest(key, RecordState.COMPLETED, resolution, audit, wanted)
        )
        if isinstance(resolved, Refused):
            now = resolved.record.state.value if resolved.record else ""
            return FreedAttempt(str(key), wanted, Freed.MOVED_ON, now)
        return FreedAttempt(str(key), wanted, Freed.FREED, RecordState.NOT_APPLIED.value)


def _same_pause(now: Pause | None, then: Pause) -> bool:
    """True while the pause is the one a resume read (only its snapshot may have grown)."""
    return now is not None and (now.origin, now.since_ms) == (then.origin, then.since_ms)


def _status(record: EffectRecord) -> int:
    return record.status


def _freeable(record: EffectRecord | None, fence: int) -> Freed:
    if record is None:
        return Freed.GONE
    if record.state is RecordState.NOT_APPLIED:
        return Freed.ALREADY_FREE  # at any attempt: the re-run is sent either way
    if record.fence != fence:
        return Freed.MOVED_ON
    if record.state is RecordState.UNKNOWN:
        return Freed.UNKNOWN
    if record.failed:
        return Freed.FREED
    return Freed.MOVED_ON


def _retry_refusal(key: RecordKey, record: EffectRecord) -> str:
    if record.state is RecordState.UNKNOWN:
        return (
            f"effect {key} has an unknown outcome, not a failure: say whether it happened with"
            f" `idemproxy review resolve {key} --as applied|not-applied`"
        )
    if record.state is RecordState.NOT_APPLIED:
        return f"effect {key} is already free: its next request is sent; nothing changed"
    if record.state is RecordState.IN_FLIGHT:
        return f"effect {key} is being sent right now; nothing changed"
    return f"effect {key} completed with status {_status(record)}, so there is nothing to retry"


def _next_step(freed: list[FreedAttempt]) -> str:
    review = [item.effect_key for item in freed if item.result is Freed.UNKNOWN]
    step = "the agent acts again: re-run its batches; freed effects are sent to the upstream"
    if review:
        step += (
            f". {len(review)} effect(s) have an unknown outcome and stay in review:"
            " `idemproxy review list`"
        )
    return step


def _conflict(detail: str, control: AgentControl | None = None) -> RequestRefused:
    extra = {"state": _describe(control.pause)} if control is not None else {}
    return RequestRefused(ProblemCode.STATE_CONFLICT, detail, extra=extra)


def _lost(agent: str, now: AgentControl, freed: list[FreedAttempt]) -> RequestRefused:
    count = sum(item.result is Freed.FREED for item in freed)
    if now.pause is None:
        detail = f"agent {agent!r} was resumed by someone else meanwhile"
    else:
        detail = (
            f"agent {agent!r} was {_describe(now.pause)} while it was being resumed; that pause"
            " stands"
        )
    return RequestRefused(
        ProblemCode.STATE_CONFLICT,
        f"{detail}. {count} failed effect(s) were freed: they are sent once the agent runs",
        extra={"state": _describe(now.pause), "freed": [item.effect_key for item in freed]},
    )
