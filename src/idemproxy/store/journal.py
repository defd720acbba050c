"""What the store keeps beside effect records for the ledger: delivery cursors and the audit log.

Both are per agent, like the records, so that on Redis they share the agent's hash slot and a
resolution can be written together with its audit entry in one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeliveryCursor:
    """Where delivery of one agent's outbox to the recovery controller stands.

    Written only by compare-and-set on ``version`` (0: never written), so two proxies sharing a
    store never both deliver an agent's events: one holds the lease (``owner`` until
    ``lease_expires_ms``), and a takeover after it lapses resumes from ``acked``.
    """

    acked: str = ""  # the last event id the controller accepted; "" when none yet
    owner: str = ""
    lease_expires_ms: int = 0
    attempts: int = 0  # failed attempts at delivering the events after ``acked``
    retry_at_ms: int = 0  # no attempt before this time (backoff)
    last_error: str = ""
    parked_ms: int = 0  # > 0: attempts ran out at this time; waits for a retry command
    version: int = 0

    @property
    def parked(self) -> bool:
        return self.parked_ms > 0


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action: who did what to which key or batch, and the state before and after.

    ``ts_ms`` and ``entry_id`` are given by the store when it appends the entry.
    """

    agent: str
    action: str
    actor: str
    target: str
    before: str = ""
    after: str = ""
    note: str = ""
    ts_ms: int = 0
    entry_id: str = ""


@dataclass(frozen=True, slots=True)
class ClearedRecord:
    """A ``not_applied`` record to delete when a batch is cleared, if it still holds ``fence``."""

    effect_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class ClearRequest:
    """Clear a batch so its recovery may run again: delete ``records`` (those still
    ``not_applied`` at their fence), keep ``archive`` (if given) and append ``audit``."""

    agent: str
    batch: str
    records: Sequence[ClearedRecord]
    archive: bytes | None
    audit: AuditEntry
