"""Approvals: an effect held before it is sent, until an operator approves or denies it.

One approval belongs to one request: an agent's key and the fingerprint of the payload, so a
changed payload under the same key is another approval (:func:`approval_id`). It moves::

    (none) --hold--> awaiting_approval --decide--> approved --take--> used
                          ^      |                    |
                          |      +--decide--> denied  +--(valid_until passed)--> expired
                          +---------hold (expired, used)-------------------------------+

- **hold**: the proxy found a request that needs approval and none it could use: the approval
  is asked for (again, if the last one expired or was used by an attempt that did nothing).
- **decide**: an operator's compare-and-set from ``awaiting_approval``, to ``approved`` (usable
  until ``valid_until_ms``) or ``denied`` (final: every repeat gets the operator's note).
- **take**: one claimed attempt uses the approval, from ``approved`` to ``used``; a second can
  not. An approval past its time turns ``expired`` instead, there or in the sweep.

Each change writes its event to the agent's outbox (and a decision its audit entry) in the same
step. The functions below decide from the approval as it stands and the store's time, for the
backends that decide in Python (memory, SQLite); the Redis script follows them in Lua.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol
from urllib.parse import quote

from idemproxy.store.journal import AuditEntry
from idemproxy.store.records import EffectMeta, EventType, RecordKey

# How many characters of the request summary an approval keeps.
MAX_SUMMARY_CHARS = 4000


class ApprovalState(StrEnum):
    AWAITING = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    USED = "used"
    EXPIRED = "expired"


# Awaiting a decision or a use: what the console lists and the agent's repeats wait on.
OPEN_STATES = frozenset({ApprovalState.AWAITING, ApprovalState.APPROVED})


def approval_link(agent: str, approval: str) -> str:
    """Where the admin API shows the approval: the link of every refusal and document."""
    return f"/v1/approvals/{quote(agent, safe='')}/{approval}"


def approval_id(key: RecordKey, fingerprint: str) -> str:
    """The approval of this payload under this key: the same on every proxy and after restarts,
    another for another payload or another key."""
    digest = hashlib.sha256(f"{key.agent}\0{key.effect_id}\0{fingerprint}".encode())
    return "ap_" + digest.hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Approval:
    approval_id: str
    key: RecordKey
    fingerprint: str
    meta: EffectMeta
    state: ApprovalState
    rule: str  # why the effect is held, as the policy states it
    summary: str  # the request with its secrets redacted, as the operator reads it
    requested_ms: int
    decided_ms: int = 0
    valid_until_ms: int = 0  # approved: a take after this time finds it expired
    actor: str = ""  # who decided
    note: str = ""  # the operator's note; a denied request's repeats are told it
    keep_ms: int = 0  # how long a settled one (denied, used, expired) is kept
    requests: int = 0  # how many times it was asked for
    valid_ms: int = 0  # an approval is usable this long from the decision (the rule's TTL)

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True, slots=True)
class HoldRequest:
    """Ask for approval of the request ``fingerprint`` under ``key``."""

    key: RecordKey
    fingerprint: str
    meta: EffectMeta
    rule: str
    summary: str
    keep_ms: int  # how long the approval is kept once settled (the route's ttl_s)
    valid_ms: int  # how long an approval is usable once given (the rule's approval_ttl_s)

    @property
    def approval_id(self) -> str:
        return approval_id(self.key, self.fingerprint)


@dataclass(frozen=True, slots=True)
class DecideRequest:
    """An operator's answer to an approval that awaits one."""

    agent: str
    approval_id: str
    approve: bool
    audit: AuditEntry  # appended in the same step
    actor: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    """What a step writes: the approval as it becomes, and the events it emits, in order."""

    approval: Approval
    events: tuple[EventType, ...]
    # Set when the step expired the approval before asking for it again: its
    # ``effect.approval_expired`` tells the approval as it expired (who approved it, until when).
    expired: Approval | None = None

    def told(self, event: EventType) -> Approval:
        """The approval as ``event`` tells it: as it was when that event happened."""
        if event is EventType.APPROVAL_EXPIRED and self.expired is not None:
            return self.expired
        return self.approval


def held(found: Approval | None, request: HoldRequest, now_ms: int) -> Change | None:
    """What :meth:`~idemproxy.store.protocols.Approvals.hold` writes; None: nothing changes
    (it awaits a decision, or was approved and is still usable, or denied)."""
    requested = EventType.APPROVAL_REQUESTED
    if found is None:
        approval = Approval(
            approval_id=request.approval_id,
            key=request.key,
            fingerprint=request.fingerprint,
            meta=request.meta,
            state=ApprovalState.AWAITING,
            rule=request.rule,
            summary=request.summary[:MAX_SUMMARY_CHARS],
            requested_ms=now_ms,
            keep_ms=request.keep_ms,
            requests=1,
            valid_ms=request.valid_ms,
        )
        return Change(approval, (requested,))
    lapse = lapsed(found, now_ms)
    if lapse is not None:
        asked = _asked_again(lapse.approval, now_ms)
        return Change(asked, (*lapse.events, requested), expired=lapse.approval)
    if found.state in (ApprovalState.USED, ApprovalState.EXPIRED):
        return Change(_asked_again(found, now_ms), (requested,))
    return None


def _asked_again(approval: Approval, now_ms: int) -> Approval:
    return dataclasses.replace(
        approval,
        state=ApprovalState.AWAITING,
        requested_ms=now_ms,
        decided_ms=0,
        valid_until_ms=0,
        actor="",
        note="",
        requests=approval.requests + 1,
    )


def decided(found: Approval | None, request: DecideRequest, now_ms: int) -> Change | None:
    """What :meth:`~idemproxy.store.protocols.Approvals.decide` writes; None: refused, since
    the approval does not await a decision."""
    if found is None or found.state is not ApprovalState.AWAITING:
        return None
    state = ApprovalState.APPROVED if request.approve else ApprovalState.DENIED
    approval = dataclasses.replace(
        found,
        state=state,
        decided_ms=now_ms,
        valid_until_ms=now_ms + found.valid_ms if request.approve else 0,
        actor=request.actor,
        note=request.note,
    )
    return Change(approval, (EventType.APPROVED if request.approve else EventType.DENIED,))


def taken(found: Approval | None, now_ms: int) -> Change | None:
    """What :meth:`~idemproxy.store.protocols.Approvals.take` writes: used if approved and
    still valid, expired if approved too long ago; None otherwise (nothing to take)."""
    if found is None or found.state is not ApprovalState.APPROVED:
        return None
    lapse = lapsed(found, now_ms)
    if lapse is not None:
        return lapse
    return Change(dataclasses.replace(found, state=ApprovalState.USED), ())


def take_answer(found: Approval | None, change: Change | None) -> Approval | None:
    """What :meth:`~idemproxy.store.protocols.Approvals.take` returns, given what
    :func:`taken` decided: the approval as this call left it, or as it stands when the call
    changed nothing; None when there is none, or when another take used it already, so that
    only the one call that used it ever gets it back ``used``."""
    if change is not None:
        return change.approval
    if found is None or found.state is ApprovalState.USED:
        return None
    return found


def lapsed(found: Approval, now_ms: int) -> Change | None:
    """An approval not used in time turns expired; None when it is not such a one."""
    if found.state is not ApprovalState.APPROVED or now_ms < found.valid_until_ms:
        return None
    approval = dataclasses.replace(found, state=ApprovalState.EXPIRED)
    return Change(approval, (EventType.APPROVAL_EXPIRED,))


def approval_extra(approval: Approval) -> dict[str, str]:
    """What an approval's event carries beside the effect's fields: which approval, why it was
    held, who decided and until when it is usable."""
    extra = {"approval_id": approval.approval_id, "rule": approval.rule}
    if approval.actor:
        extra["actor"] = approval.actor
    if approval.valid_until_ms:
        extra["valid_until_ms"] = str(approval.valid_until_ms)
    return extra


def expires_ms(approval: Approval, now_ms: int) -> int | None:
    """When the store may drop the approval: never while it is open, ``keep_ms`` after it
    settled (a denied request's repeats are told the note that long)."""
    if approval.open:
        return None
    return now_ms + approval.keep_ms


class Approvals(Protocol):
    """Effects held for an operator's approval before they are sent (store/approvals.py), per
    agent. Each change writes its events to the agent's outbox in the same step; the agent is
    on the ``Work.APPROVAL`` worklist while it has an open approval, and on ``Work.DELIVERY``
    for the events, from that step on."""

    async def hold(self, request: HoldRequest) -> Approval:
        """Ask for approval of the request, and return the approval as it then stands.

        None yet: one is opened ``awaiting_approval`` (``effect.approval_requested``). Expired,
        or used by an attempt that did nothing: asked for again, from ``awaiting_approval``
        (an approved one past its time emits ``effect.approval_expired`` first). Awaiting,
        approved and still valid, or denied: unchanged.
        """
        ...

    async def decide(self, request: DecideRequest) -> Approval | None:
        """Compare-and-set from ``awaiting_approval`` to ``approved`` (valid ``valid_ms`` from
        now; ``effect.approved``) or ``denied`` (``effect.denied``), appending ``audit``.

        None when there is no such approval or it does not await a decision (nothing changed).
        """
        ...

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        """Use an approval for one attempt: from ``approved`` to ``used``, once.

        An approval past its time turns ``expired`` (``effect.approval_expired``) instead.
        Returns the approval as it then stands (store/approvals.py ``take_answer``), None when
        there is none or another take used it already: the caller forwards only when it comes
        back ``used``, which only the one call that used it ever sees.
        """
        ...

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        """The approval as it stands, or None (never asked for, or settled and no longer
        kept)."""
        ...

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        """The agent's open approvals (awaiting a decision, or approved and not yet used),
        oldest request first."""
        ...

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        """Turn approved approvals past their time ``expired``, as a take would, and return
        them: the sweep's part, so the controller hears of it without waiting for a repeat."""
        ...
