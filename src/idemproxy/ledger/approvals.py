"""Held effects an operator approves or denies (store/approvals.py, docs/approvals.md).

A decision is compare-and-set on the approval: it applies only while the approval still awaits
one. Approving lets exactly one attempt of that payload through, within the rule's
``approval_ttl_s``; denying is final for that payload, and the agent's repeats are told the note.
"""

from __future__ import annotations

from enum import StrEnum

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.ledger.review import not_found
from idemproxy.store.approvals import Approval, ApprovalState, DecideRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.work import Work


class Verdict(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"

    @classmethod
    def parse(cls, text: str) -> Verdict:
        """``approved``/``approve`` or ``denied``/``deny``."""
        verdict = _VERDICTS.get(text)
        if verdict is not None:
            return verdict
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"{text!r} is not a verdict: decide 'approved' (send it, once) or 'denied' (never)",
        )


_VERDICTS = {
    "approved": Verdict.APPROVED,
    "approve": Verdict.APPROVED,
    "denied": Verdict.DENIED,
    "deny": Verdict.DENIED,
}


class ApprovalDesk:
    """List what waits for approval, show one, decide one."""

    def __init__(self, store: Store, limit: ActionLimit) -> None:
        self._store = store
        self._limit = limit

    async def waiting(self, agent: str | None = None, limit: int = 100) -> list[Approval]:
        """Open approvals (awaiting a decision, or approved and not yet used) of one agent or of
        every agent that has one, oldest request first."""
        if agent is not None:
            return await self._store.list_approvals(agent, limit)
        found: list[Approval] = []
        for owner in await self._store.list_busy_agents(Work.APPROVAL):
            found += await self._store.list_approvals(owner, limit)
        return sorted(found, key=lambda approval: approval.requested_ms)[:limit]

    async def item(self, agent: str, approval_id: str) -> Approval:
        approval = await self._store.get_approval(agent, approval_id)
        if approval is None:
            raise not_found(f"approval {approval_id!r} of agent {agent!r}")
        return approval

    async def decide(
        self, agent: str, approval_id: str, verdict: Verdict, actor: str, note: str
    ) -> Approval:
        """Approve or deny; refused (409, with the approval as it stands) unless it awaits."""
        await self._limit.check(agent)
        audit = AuditEntry(
            agent,
            AuditAction.APPROVE if verdict is Verdict.APPROVED else AuditAction.DENY,
            actor,
            approval_id,
            ApprovalState.AWAITING.value,
            verdict.value,
            note,
        )
        request = DecideRequest(
            agent, approval_id, verdict is Verdict.APPROVED, audit, actor=actor, note=note
        )
        decided = await self._store.decide(request)
        if decided is not None:
            return decided
        standing = await self.item(agent, approval_id)
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"approval {approval_id!r} is {standing.state}, not awaiting a decision: someone"
            " decided it first, or it was used or expired; nothing changed",
            extra={"state": str(standing.state)},
        )
