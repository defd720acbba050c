"""What the store keeps about an agent beside its records: whether it is paused, and the run of
failures that pauses it automatically.

Each settle of an attempt counts (when the proxy asks it to, ``Settlement.pause_after_failures``):
an outcome that failed (an error status, unknown, or not applied) joins the agent's streak, any
other outcome clears it. The failure that makes the streak ``pause_after_failures`` long pauses
the agent in the same atomic step, after copying the streak into the recovery snapshot: the
attempts an operator's resume ("mark fixed") frees, so that the re-run reaches the upstream.

A pause written (by an operator or automatically) emits ``agent.paused``, a cleared one
``agent.resumed``, in the same step (store/records.py ``EventType``).

Every change of the pause moves ``version`` on, and so does each failure added to the snapshot
of an automatic pause: writers compare-and-set on it. All of it is per agent, so on Redis it
lives in the agent's hash slot, and it expires with the agent's audit log when the agent has
been gone that long.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from idemproxy.store.journal import AuditEntry

MAX_STREAK = 1000  # the most failures kept per agent (the highest threshold config allows)
MAX_ERROR_CHARS = 200
AUTO_ACTOR = "idemproxy"
AUTO_PAUSE_ACTION = "agent.auto_pause"


class PauseOrigin(StrEnum):
    AUTO = "auto"  # the failure streak reached the threshold
    OPERATOR = "operator"  # ``idemproxy agent pause``


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """One failed attempt: the record and the fence it held when it failed."""

    effect_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Why and since when an agent's effects are held; ``since_ms`` is stamped by the store."""

    origin: PauseOrigin
    reason: str
    actor: str
    since_ms: int = 0


@dataclass(frozen=True, slots=True)
class AgentControl:
    """An agent's pause, its current failure streak and the snapshot of its automatic pause."""

    pause: Pause | None = None
    streak: tuple[FailedAttempt, ...] = ()
    snapshot: tuple[FailedAttempt, ...] = ()
    version: int = 0

    @property
    def failures(self) -> int:
        """Consecutive failures since the last success or resume."""
        return len(self.streak)

    @property
    def auto_paused(self) -> bool:
        return self.pause is not None and self.pause.origin is PauseOrigin.AUTO


@dataclass(frozen=True, slots=True)
class PauseRequest:
    """Compare-and-set: set the agent's ``pause``, or clear it (None), if its control is still
    at ``version``; ``reset_failures`` also empties the streak and the snapshot."""

    agent: str
    version: int
    pause: Pause | None
    audit: AuditEntry  # appended in the same step
    reset_failures: bool = False


def auto_pause_reason(failures: int, last_error: str) -> str:
    """The reason an automatic pause gives (the Redis store writes the same words in Lua)."""
    return f"auto-paused after {failures} consecutive failures. Last error: {last_error}"


def pause_event(request: PauseRequest) -> tuple[str, str, str]:
    """The outbox event a pause write emits in its step: type, reason and state after it."""
    if request.pause is not None:
        return "agent.paused", request.pause.reason, "paused"
    reason = request.audit.note or f"resumed by {request.audit.actor}"
    return "agent.resumed", reason, "running"


def abandon_reason(audit: AuditEntry) -> str:
    """The reason a ``batch.abandoned`` event gives: the operator's note, or who it was."""
    return audit.note or f"abandoned by {audit.actor}"


def auto_pause_audit(agent: str, reason: str) -> AuditEntry:
    return AuditEntry(
        agent=agent,
        action=AUTO_PAUSE_ACTION,
        actor=AUTO_ACTOR,
        target=agent,
        before="running",
        after="paused",
        note=reason,
    )


def counted(
    control: AgentControl, attempt: FailedAttempt, error: str | None, limit: int, now_ms: int
) -> tuple[AgentControl, bool]:
    """``control`` after an outcome (``error`` None: it succeeded); True when it now pauses.

    The reference the backends that count in Python share, and that the Lua version follows.
    """
    if error is None:
        return dataclasses.replace(control, streak=()), False
    streak = (*control.streak, attempt)[-MAX_STREAK:]
    if control.auto_paused:
        snapshot = (*control.snapshot, attempt)
        bumped = dataclasses.replace(control, streak=streak, snapshot=snapshot)
        return dataclasses.replace(bumped, version=control.version + 1), False
    if control.pause is not None or len(streak) < limit:
        return dataclasses.replace(control, streak=streak), False
    # The snapshot is taken from the streak before the pause is set: one step, in that order.
    reason = auto_pause_reason(len(streak), error)
    pause = Pause(PauseOrigin.AUTO, reason, AUTO_ACTOR, now_ms)
    paused = AgentControl(pause, streak, snapshot=streak, version=control.version + 1)
    return paused, True


def written_pause(control: AgentControl, request: PauseRequest, now_ms: int) -> AgentControl:
    """``control`` once an operator set (or cleared) its pause."""
    pause = request.pause
    if pause is not None:
        pause = dataclasses.replace(pause, since_ms=now_ms)
    written = dataclasses.replace(control, pause=pause, version=control.version + 1)
    if request.reset_failures:
        written = dataclasses.replace(written, streak=(), snapshot=())
    return written
