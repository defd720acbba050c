"""What the memory store keeps, shared by its parts: plain dicts in the process."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from idemproxy.store.approvals import Approval, approval_extra
from idemproxy.store.control import AgentControl
from idemproxy.store.journal import AuditEntry, DeliveryCursor
from idemproxy.store.outcomes import ARCHIVED_STATES, ArchivedOutcome, archived_outcome
from idemproxy.store.records import EffectEvent, EffectMeta, EffectRecord, EventType, RecordKey
from idemproxy.store.retention import DEFAULT_RETENTION, Retention

# A batch's archive of outcomes: effect id -> outcome, and when the whole archive expires.
OutcomeArchive = tuple[dict[str, ArchivedOutcome], int]


class MemoryTables:
    """The memory store's state; every part reads and writes it under the event loop, so each
    call is atomic without a lock (none awaits in the middle of a change)."""

    def __init__(
        self, clock_ms: Callable[[], int], retention: Retention = DEFAULT_RETENTION
    ) -> None:
        self.clock_ms = clock_ms
        self.retention = retention
        self.records: dict[RecordKey, tuple[EffectRecord, int]] = {}  # record, expires_ms
        self.events: dict[str, list[EffectEvent]] = {}
        self.cursors: dict[str, DeliveryCursor] = {}
        self.audit: dict[str, list[AuditEntry]] = {}
        self.archives: dict[tuple[str, str], bytes] = {}
        self.outcomes: dict[tuple[str, str], OutcomeArchive] = {}
        self.controls: dict[str, AgentControl] = {}
        self.fences: dict[str, int] = {}  # the last fence handed out, per agent
        # (agent, approval id) -> approval, and when it may be dropped (None: while open).
        self.approvals: dict[tuple[str, str], tuple[Approval, int | None]] = {}
        self._next_id = 0  # of events and audit entries, which order together

    def live(self, key: RecordKey, now_ms: int) -> EffectRecord | None:
        """The record at ``key``, dropped once its TTL has passed."""
        entry = self.records.get(key)
        if entry is None:
            return None
        record, expires_ms = entry
        if expires_ms <= now_ms:
            del self.records[key]
            return None
        return record

    def live_records(self, agent: str, now_ms: int) -> list[EffectRecord]:
        """The agent's records that have not expired, in no order."""
        return [
            record
            for key in list(self.records)
            if key.agent == agent and (record := self.live(key, now_ms)) is not None
        ]

    def archive_outcome(self, record: EffectRecord, now_ms: int) -> None:
        """Keep the outcome of a record whose TTL starts now in its batch's archive; the
        archive lives ``archive_s`` from its latest outcome, as on Redis."""
        if record.state not in ARCHIVED_STATES:
            return
        where = record.key.agent, record.meta.batch
        outcomes = self.live_outcomes(*where, now_ms)
        outcomes[record.key.effect_id] = archived_outcome(record)
        self.outcomes[where] = outcomes, now_ms + self.retention.archive_ms

    def live_outcomes(self, agent: str, batch: str, now_ms: int) -> dict[str, ArchivedOutcome]:
        """The batch's archived outcomes, dropped once the archive expired."""
        outcomes, expires_ms = self.outcomes.get((agent, batch), ({}, 0))
        if expires_ms <= now_ms:
            self.outcomes.pop((agent, batch), None)
            return {}
        return outcomes

    def next_fence(self, agent: str, above: int) -> int:
        """A fence above every fence the agent's keys ever had, expired records' included."""
        fence = self.fences[agent] = max(self.fences.get(agent, 0), above) + 1
        return fence

    def control(self, agent: str) -> AgentControl:
        return self.controls.get(agent, AgentControl())

    def emit(self, record: EffectRecord, type_: EventType, now_ms: int) -> None:
        """Append the record's current state to its agent's outbox."""
        event = EffectEvent(
            event_id=self._new_id(),
            type=type_,
            key=record.key,
            meta=record.meta,
            status=record.status,
            external_id=record.external_id,
            reason=record.reason,
            ts_ms=now_ms,
            state=record.state.value,
        )
        self.events.setdefault(record.key.agent, []).append(event)
        if type_ is EventType.UNKNOWN:  # the agent is in error until someone decides
            self.emit_agent(
                EventType.AGENT_ERROR,
                record.key,
                record.meta,
                record.reason,
                record.state.value,
                now_ms,
            )

    def emit_agent(
        self,
        type_: EventType,
        key: RecordKey,
        meta: EffectMeta,
        reason: str,
        state: str,
        now_ms: int,
    ) -> None:
        """Append an event of the agent (``key.effect_id`` "" when no one effect caused it)."""
        event = EffectEvent(
            event_id=self._new_id(),
            type=type_,
            key=key,
            meta=meta,
            reason=reason,
            ts_ms=now_ms,
            state=state,
        )
        self.events.setdefault(key.agent, []).append(event)

    def emit_approval(self, approval: Approval, type_: EventType, now_ms: int) -> None:
        """Append an approval's change to its agent's outbox, naming the approval."""
        event = EffectEvent(
            event_id=self._new_id(),
            type=type_,
            key=approval.key,
            meta=approval.meta,
            reason=approval.note,
            ts_ms=now_ms,
            state=approval.state.value,
            extra=approval_extra(approval),
        )
        self.events.setdefault(approval.key.agent, []).append(event)

    def append_audit(self, entry: AuditEntry, now_ms: int) -> AuditEntry:
        entry = dataclasses.replace(entry, ts_ms=now_ms, entry_id=self._new_id())
        self.audit.setdefault(entry.agent, []).append(entry)
        return entry

    def _new_id(self) -> str:
        self._next_id += 1
        return f"{self._next_id:020d}"
