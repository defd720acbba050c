"""The audit entries the proxy writes itself: outcomes it changed, attempts it refused.

An operator's action is audited by the ledger (ledger/audit.py); these are the changes no
operator made, written with the actor ``idemproxy`` (store/control.py ``AUTO_ACTOR``), so the
audit log answers "why is this record in this state?" whoever changed it. Where the store
writes the change and its entry in one step (a resolve carries one) the entry rides with it;
otherwise (a settle, a refusal, the sweep) it follows the change as a write of its own, on
paths that are rare by nature: a normal forwarded-and-settled effect writes none.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Protocol

from idemproxy.store.control import AUTO_ACTOR
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import AuditEntry

log = logging.getLogger(__name__)


class AutoAction(StrEnum):
    RECONCILED = "effect.reconciled"  # an adapter's re-send or read-back settled the outcome
    APPEND_PRESENT = "append.present"  # the text was already there: nothing sent
    APPEND_REMAINDER = "append.remainder"  # part of it was: only the rest sent
    LAPSED = "effect.lapsed"  # the sweep turned a lapsed lease unknown
    LATE_SETTLE_REFUSED = "effect.late_settle_refused"  # the fence moved before the settle
    CONFLICT_REFUSED = "effect.conflict_refused"  # a key sent again with another request
    FORGED_COMPENSATION = "compensation.forged_refused"  # Idem-Compensates without the seal
    APPROVAL_REQUESTED = "approval.requested"  # an effect held until an operator approves it
    APPROVAL_USED = "approval.used"  # the one attempt an approval was given for
    APPROVAL_EXPIRED = "approval.expired"  # an approval not used in time


class AuditLog(Protocol):
    """The part of the store's Journal the proxy writes to."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry: ...


def automatic(
    agent: str, action: AutoAction, target: str, before: str, after: str, note: str = ""
) -> AuditEntry:
    """An entry of a change the proxy made itself."""
    return AuditEntry(agent, action, AUTO_ACTOR, target, before, after, note)


class EffectAudit:
    """Writes the proxy's own entries; a store that cannot take one loses the entry, not the
    request: the change itself is already written (or refused), and the log says so."""

    def __init__(self, audit_log: AuditLog) -> None:
        self._log = audit_log

    async def write(self, entry: AuditEntry) -> None:
        try:
            await self._log.append_audit(entry)
        except StoreError as exc:
            log.warning(
                "could not write an audit entry: %s",
                exc,
                extra={"action": entry.action, "target": entry.target},
            )
