"""The data model every store backend keeps: effect records, stored responses and events.

An effect record moves through these states (SPEC section 4)::

    (none) --claim--> in_flight --settle--> completed
                         |  ^                unknown      --resolve--> completed | not_applied
                         |  |                not_applied  --claim----> in_flight
                         |  |   (resolve is compare-and-set from any state it is told to expect)
                         |  +-- lease renewed by its holder
                         +-- lease expired, seen by a later claim or a sweep --> unknown

Only the holder of the current fencing token may settle or renew an in_flight record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from idemproxy.store.control import MAX_ERROR_CHARS, Pause
from idemproxy.store.journal import AuditEntry


class RecordState(StrEnum):
    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"
    UNKNOWN = "unknown"
    NOT_APPLIED = "not_applied"


class EventType(StrEnum):
    COMPLETED = "effect.completed"
    FAILED = "effect.failed"
    UNKNOWN = "effect.unknown"
    NOT_APPLIED = "effect.not_applied"
    REPLAYED = "effect.replayed"
    RESOLVED = "effect.resolved"
    # Of an effect held for an operator's approval before it is sent (store/approvals.py).
    APPROVAL_REQUESTED = "effect.approval_requested"
    APPROVED = "effect.approved"
    DENIED = "effect.denied"
    APPROVAL_EXPIRED = "effect.approval_expired"
    # Of the agent, not of one effect (store/control.py): written in the same step as the
    # change they report, with the effect that caused it where there is one.
    AGENT_ERROR = "agent.error"  # an effect turned unknown: the agent needs a decision
    AGENT_PAUSED = "agent.paused"
    AGENT_RESUMED = "agent.resumed"
    BATCH_ABANDONED = "batch.abandoned"


@dataclass(frozen=True, slots=True)
class RecordKey:
    """Where a record lives: the agent (the store's partition) and the effect id within it."""

    agent: str
    effect_id: str

    def __str__(self) -> str:
        return f"{self.agent}/{self.effect_id}"


# Marks a recorded answer that reports a failure its status does not: an MCP tool's isError
# result or a JSON-RPC error, both sent with 200. Kept among the record's headers, which a
# JSON-RPC replay never passes on (effects/envelope.py), so stores need no field for it.
ANSWER_FAILED_HEADER = "Idem-Answer-Failed"


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """What a replay answers with. Headers are already allow-listed; secrets never get here."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    body_truncated: bool = False

    @property
    def failed(self) -> bool:
        """The answer reports a failure: an error status, or the mark of one its status does
        not show (ANSWER_FAILED_HEADER)."""
        return self.status >= 400 or any(name == ANSWER_FAILED_HEADER for name, _ in self.headers)


@dataclass(frozen=True, slots=True)
class EffectMeta:
    """Facts about the effect that are fixed at claim time and travel with every event."""

    batch: str = ""
    tool_call: str = ""
    action: str = ""
    upstream: str = ""
    method: str = ""
    path: str = ""


@dataclass(frozen=True, slots=True)
class EffectRecord:
    key: RecordKey
    state: RecordState
    fence: int
    fingerprint: str
    meta: EffectMeta
    lease_expires_ms: int = 0
    created_ms: int = 0
    updated_ms: int = 0
    attempts: int = 0
    response: StoredResponse | None = None
    external_id: str = ""
    reason: str = ""

    @property
    def status(self) -> int:
        """The recorded answer's HTTP status; 0 while none is recorded."""
        return self.response.status if self.response is not None else 0

    @property
    def failed(self) -> bool:
        """Completed with an answer that reports a failure (StoredResponse.failed)."""
        return (
            self.state is RecordState.COMPLETED
            and self.response is not None
            and self.response.failed
        )


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    key: RecordKey
    fingerprint: str
    meta: EffectMeta
    lease_ms: int
    ttl_s: int
    # An operator's own effect (a compensation) is claimed even while the agent is paused.
    ignore_pause: bool = False
    # A freed (not_applied) record is taken even when its fingerprint differs: the key names a
    # tool call, and a re-run of a tool call whose first attempt did nothing may be worded anew.
    reworded_may_reclaim: bool = False


@dataclass(frozen=True, slots=True)
class Unreplicated:
    """A claim that the store's replicas did not confirm in time (Redis ``wait_replicas``).

    The key is held all the same, but a failover now would promote a replica without the claim
    and let a repeat be sent again: the holder must not act on it.
    """

    wanted: int  # replicas asked for
    confirmed: int  # replicas that had the claim when the wait ended
    timeout_ms: int
    error: str = ""  # the server's answer to the wait, when it was an error and not a count

    def __str__(self) -> str:
        if self.error:
            return f"the wait failed: {self.error}"
        return f"{self.confirmed} of {self.wanted} within {self.timeout_ms} ms"


@dataclass(frozen=True, slots=True)
class Claimed:
    """This attempt now holds the key, at ``fence``."""

    fence: int
    # When the effect's first attempt was claimed, by the store's clock (the record's
    # ``created_ms``). The same for every attempt of one effect, so a native key cut from it is
    # too.
    first_attempt_ms: int
    # Set when the store's replicas did not confirm the claim: release it, send nothing.
    unreplicated: Unreplicated | None = None


@dataclass(frozen=True, slots=True)
class Standing:
    """The claim was refused and ``record`` stands: in flight under a live lease, completed,
    unknown, or freed (not_applied) under another fingerprint when the request does not say
    ``reworded_may_reclaim``. The caller decides what the request gets from it. A claim that
    finds an expired lease turns the record ``unknown`` (its holder died) and returns that."""

    record: EffectRecord
    lapsed: bool = False  # this claim found the lease run out and turned the record unknown


@dataclass(frozen=True, slots=True)
class Paused:
    """The claim would have taken the key, but the agent is paused: nothing changed."""

    pause: Pause


# What a claim found: match on it (``case Claimed(fence=fence): ...``).
ClaimResult: TypeAlias = Claimed | Standing | Paused


@dataclass(frozen=True, slots=True)
class Settlement:
    """The outcome the holder of a claim writes back."""

    state: RecordState
    response: StoredResponse | None = None
    external_id: str = ""
    reason: str = ""
    ttl_s: int = 86_400
    # > 0: count this outcome in the agent's failure streak, and pause the agent when a failure
    # makes the streak this long (store/control.py).
    pause_after_failures: int = 0

    def __post_init__(self) -> None:
        if self.state is RecordState.IN_FLIGHT:
            raise ValueError("a settlement ends an attempt: its state cannot be in_flight")

    def failure(self) -> str | None:
        """What went wrong, if this outcome is a failure (an error status, unknown or not
        applied), cut to a length a pause reason can carry; None for a success."""
        if self.event_type() is EventType.COMPLETED:
            return None
        status = self.response.status if self.response is not None else 0
        error = self.reason or f"upstream answered {status}"
        return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"

    def event_type(self) -> EventType:
        if self.state is RecordState.COMPLETED:
            failed = self.response is not None and self.response.failed
            return EventType.FAILED if failed else EventType.COMPLETED
        if self.state is RecordState.UNKNOWN:
            return EventType.UNKNOWN
        return EventType.NOT_APPLIED


@dataclass(frozen=True, slots=True)
class Resolution:
    """A verdict on a record whose outcome was in doubt: by an operator, or by an upstream
    adapter that proved it (a read-back found the post, a native key is still deduplicated).

    ``COMPLETED`` means applied: repeats replay ``response`` (None: the caller had none to give).
    ``NOT_APPLIED`` frees the key: the next request is forwarded.
    """

    state: RecordState
    response: StoredResponse | None = None
    external_id: str = ""
    reason: str = ""
    ttl_s: int = 86_400

    def __post_init__(self) -> None:
        if self.state not in (RecordState.COMPLETED, RecordState.NOT_APPLIED):
            raise ValueError("a resolution ends as completed (applied) or not_applied")


@dataclass(frozen=True, slots=True)
class ResolveRequest:
    """Compare-and-set: move the record at ``key`` from ``expected`` to ``resolution.state``."""

    key: RecordKey
    expected: RecordState
    resolution: Resolution
    audit: AuditEntry | None = None  # appended in the same step
    fence: int | None = None  # given: only while the record is still at this fence


@dataclass(frozen=True, slots=True)
class Resolved:
    """The record moved to the resolution's state: ``record`` is it after the change."""

    record: EffectRecord


@dataclass(frozen=True, slots=True)
class Refused:
    """Nothing changed: ``record`` is the record as it stands (None: there is none)."""

    record: EffectRecord | None


# What a resolve did: match on it (``case Resolved(record=record): ...``).
ResolveResult: TypeAlias = Resolved | Refused


@dataclass(frozen=True, slots=True)
class EffectEvent:
    """One state change, as delivered to the recovery controller. ``event_id`` orders per agent."""

    event_id: str
    type: EventType
    key: RecordKey
    meta: EffectMeta
    status: int = 0
    external_id: str = ""
    reason: str = ""
    ts_ms: int = 0
    state: str = ""  # the record's state after the change
    extra: dict[str, str] = field(default_factory=dict)
