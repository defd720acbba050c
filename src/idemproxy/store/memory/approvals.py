"""The memory store's approvals: the reference semantics of store/approvals.py."""

from __future__ import annotations

from idemproxy.store.approvals import (
    Approval,
    Change,
    DecideRequest,
    HoldRequest,
    decided,
    expires_ms,
    held,
    lapsed,
    take_answer,
    taken,
)
from idemproxy.store.memory.tables import MemoryTables


class MemoryApprovals:
    """The :class:`~idemproxy.store.protocols.Approvals` part of the memory store."""

    def __init__(self, tables: MemoryTables) -> None:
        self._tables = tables

    async def hold(self, request: HoldRequest) -> Approval:
        found = self._live(request.key.agent, request.approval_id)
        change = held(found, request, self._tables.clock_ms())
        if change is None:
            assert found is not None  # held() opens one where there is none
            return found
        return self._write(change)

    async def decide(self, request: DecideRequest) -> Approval | None:
        tables = self._tables
        now_ms = tables.clock_ms()
        change = decided(self._live(request.agent, request.approval_id), request, now_ms)
        if change is None:
            return None
        tables.append_audit(request.audit, now_ms)
        return self._write(change)

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        found = self._live(agent, approval_id)
        change = taken(found, self._tables.clock_ms())
        if change is not None:
            self._write(change)
        return take_answer(found, change)

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        return self._live(agent, approval_id)

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        open_ = [
            approval
            for (owner, approval_id) in list(self._tables.approvals)
            if owner == agent
            and (approval := self._live(owner, approval_id)) is not None
            and approval.open
        ]
        return sorted(open_, key=lambda approval: approval.requested_ms)[:limit]

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        now_ms, expired = self._tables.clock_ms(), list[Approval]()
        for approval in await self.list_approvals(agent, limit=len(self._tables.approvals)):
            change = lapsed(approval, now_ms)
            if change is not None and len(expired) < limit:
                expired.append(self._write(change))
        return expired

    def _live(self, agent: str, approval_id: str) -> Approval | None:
        tables = self._tables
        entry = tables.approvals.get((agent, approval_id))
        if entry is None:
            return None
        approval, until_ms = entry
        if until_ms is not None and until_ms <= tables.clock_ms():
            del tables.approvals[(agent, approval_id)]
            return None
        return approval

    def _write(self, change: Change) -> Approval:
        tables, approval = self._tables, change.approval
        now_ms = tables.clock_ms()
        where = approval.key.agent, approval.approval_id
        tables.approvals[where] = approval, expires_ms(approval, now_ms)
        for type_ in change.events:
            tables.emit_approval(change.told(type_), type_, now_ms)
        return approval
