"""The seams between the store and its users: one small protocol per concern.

Every backend (Redis, SQLite, memory) implements all of them, as :class:`Store`, with the same
semantics, and one contract suite per protocol in ``tests/store`` holds each backend to them::

    RecordStore   test_contract.py                          claim, settle, resolve, renew, read
    Journal       test_journal_contract.py                  events, cursors, audit, archives
    Control       test_control_contract.py, test_worklist_contract.py   pauses, agent listings
                  test_batch_listing_contract.py            an agent's batches
    Safety        test_safety_contract.py                   durability, the marker, losses
    Approvals     test_approvals_contract.py                effects held for an operator
                  (declared in store/approvals.py)

A user asks for the part it uses: the proxy's effects a :class:`RecordStore`, the store guard
:class:`Safety`, the ledger and the factory the whole :class:`Store`. Errors are those of
:mod:`idemproxy.store.errors`.
"""

from __future__ import annotations

from typing import Protocol

# Approvals lives beside its data model, so that this module stays within the line limit.
from idemproxy.store.approvals import Approvals
from idemproxy.store.batches import BatchStart
from idemproxy.store.control import AgentControl, PauseRequest
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectRecord,
    RecordKey,
    ResolveRequest,
    ResolveResult,
    Settlement,
)
from idemproxy.store.retention import Retention
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.work import Forgotten, Work


class RecordStore(Protocol):
    """Effect records: claim a key for one attempt, settle its outcome, resolve an unknown one.

    Each change is paired atomically with an outbox event (:class:`Journal`). Time-based
    decisions (lease expiry) use the store's own clock where it has one, so that several
    proxies sharing a store agree on them. The proxy's effects need this alone.
    """

    backend: str

    async def ping(self) -> None:
        """Raise :class:`StoreUnavailable` unless the store answers."""

    async def now_ms(self) -> int:
        """The store's time, in milliseconds since the epoch: the clock its leases, TTLs and
        record times follow (Redis's ``TIME``; a steady clock for SQLite and memory)."""
        ...

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """Atomically take the key for one attempt, or report the record that stands.

        - no record, or ``not_applied`` with the same fingerprint (any fingerprint when the
          request says ``reworded_may_reclaim``): becomes ``in_flight`` with ``fence`` one
          above the last and a lease of ``lease_ms``; ``attempts`` grows by one.
        - ``in_flight`` under a live lease, ``completed``, ``unknown``, or a fingerprint that
          differs: unchanged, returned. A ``completed`` record with the same fingerprint emits
          an ``effect.replayed`` event (one with another fingerprint is a refusal, not a replay).
        - ``in_flight`` with an expired lease: becomes ``unknown`` (emitting ``effect.unknown``)
          and is returned.
        - a claim that would take the key while the agent is paused (and the request does not
          ``ignore_pause``): nothing changes; ``paused`` says why.
        """
        ...

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        """Write the outcome of the attempt holding ``fence``; False if it no longer holds it.

        Accepted while the record is ``in_flight`` with this fence, even after the lease ran
        out (nobody else has taken it over). The record then lives ``settlement.ttl_s``. With
        ``settlement.pause_after_failures`` the agent's failure streak is kept in the same step
        and may pause the agent (see :mod:`idemproxy.store.control`), with an audit entry.
        """
        ...

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        """Compare-and-set: move the record from ``expected`` to ``resolution.state``.

        Refused (``resolved=False``, nothing changed) when there is no record, its state is
        not ``expected`` or (given ``fence``) it is no longer at that fence. On success the
        fence grows by one, so a late settle from an attempt that still thinks it holds the key
        is dropped; the record leaves the review queue, lives ``resolution.ttl_s``, emits
        ``effect.resolved`` and, in the same step, appends ``audit``.
        """
        ...

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        """Extend the lease of a long attempt; False if the attempt no longer holds it."""
        ...

    async def get(self, key: RecordKey) -> EffectRecord | None:
        """The record as it stands, or None if there is none (or its TTL passed)."""
        ...

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        """The agent's records awaiting review (state ``unknown``), oldest first."""
        ...

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        """Every live record claimed under ``batch`` (``meta.batch``), oldest first."""
        ...

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        """Turn ``in_flight`` records whose lease ran out ``unknown``, as a claim would.

        Each emits ``effect.unknown`` and joins the review queue, so a proxy that died holding a
        request shows up there without waiting for the agent to repeat it. Returns them.
        """
        ...

    async def close(self) -> None:
        """Release connections and file handles."""
        ...


class Journal(Protocol):
    """What the ledger keeps beside the records, per agent: the outbox of events, its delivery
    cursors, the audit log and the archives of cleared batches."""

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        """Outbox events of one agent, oldest first, strictly after the event id ``after``."""
        ...

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        """How many events of the agent come after ``after``, counting no further than ``cap``."""
        ...

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        """The agent's delivery cursor; a fresh one (``version`` 0) if none was written."""
        ...

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        """Compare-and-set: store ``cursor`` if the stored version is still ``cursor.version``.

        Returns the cursor as written (version one higher), or None when someone else wrote
        meanwhile (nothing changed). ``audit`` is appended in the same step.
        """
        ...

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        """Append to the agent's audit log; returns the entry with its id and time."""
        ...

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        """The agent's newest ``limit`` audit entries, oldest first."""
        ...

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        """In one step: delete each listed record that is still ``not_applied`` at its fence,
        keep ``archive`` (if given) as the batch's archive, and append ``audit``.

        Returns the effect ids deleted. Records in any other state are never touched.
        """
        ...

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        """The archive kept by :meth:`clear_batch` for the batch, if any."""
        ...

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        """The batch's archive of outcomes (store/outcomes.py), oldest claim first.

        Each settle or resolve that starts a record's TTL (``completed``, ``not_applied``)
        writes the record's outcome there in the same step, kept ``Retention.archive_s`` from
        then, whether or not the record still lives; :meth:`clear_batch` drops the outcomes of
        the records it deletes.
        """
        ...


class Control(Protocol):
    """Per agent: the pause and the failure streak that pauses it (store/control.py), the
    listings of agents the background loops visit (store/work.py), and the listing of an
    agent's batches (store/batches.py)."""

    async def read_control(self, agent: str) -> AgentControl:
        """The agent's pause, failure streak and snapshot; a fresh one if none was written."""
        ...

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        """Compare-and-set: set the agent's pause (stamped with the store's time), or clear it
        (None), if its control is still at ``version``; ``reset_failures`` also empties the
        streak and the snapshot. ``audit`` is appended in the same step.

        Returns the control as written, or None when it changed meanwhile (nothing changed).
        """
        ...

    async def list_agents(self) -> list[str]:
        """Every agent the store holds records, events or audit entries of, sorted.

        An agent whose last record just expired may stay listed until the store purges it.
        The Redis store lists no more than its registry's cap, the agents seen most recently.
        """
        ...

    async def list_busy_agents(self, work: Work) -> list[str]:
        """The agents on the worklist of ``work`` (:mod:`idemproxy.store.work`), sorted.

        Every agent that has such work is listed. One with none left stays listed until
        :meth:`forget_agents` drops it, which the Redis store does only once no proxy has
        listed the agent for its listing grace.
        """
        ...

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        """The agent's batches with a live record, newest first by when each started
        (:mod:`idemproxy.store.batches`), at most ``limit`` (and ``MAX_LISTED_BATCHES``).

        A batch goes with its last record. One whose records just expired, or were all claimed
        again under another batch, may stay listed until the store notices; a reader that
        wants the records asks :meth:`RecordStore.batch_records` and finds none.
        """
        ...

    async def forget_agents(self) -> Forgotten:
        """Drop idle agents from the worklists, and agents past the registry's retention or
        cap from :meth:`list_agents` (never their records). The sweep runs it every pass."""
        ...


class Safety(Protocol):
    """Store-wide, not per agent: whether the store can lose records and whether it has
    (store/safety.py). Its own protocol because it has its own consumer (the store guard,
    which needs nothing else) and no agent: on Redis Cluster it lives in a slot of its own."""

    async def durability(self) -> Durability:
        """What the store says of its own ability to keep records: whether it may evict them
        and whether it keeps them across a restart (store/safety.py); unknown parts are None.
        """
        ...

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        """Check the store-wide marker for a proxy that last saw ``seen`` (None: never).

        In one step: a loss that stands is returned as it is; a store never marked is marked;
        a marker that is gone (``seen`` given, or the store's log says one was made), another
        than ``seen`` (unless it replaces it) or counting no more checks than ``seen`` is a
        loss, kept in the store and logged; otherwise the marker's count grows by one.
        """
        ...

    def expect_marker(self, marker: Marker | None) -> None:
        """From now on, claim only while the store's marker is ``marker`` (None: any).

        Checks find a store emptied since the last one only at the next; a claim on it in
        between would take a forgotten effect's key as new. The Redis store compares the
        marker's epoch inside each claim's script and raises :class:`StoreUnavailable`, before
        anything is written, when it differs (not on Redis Cluster, where the marker lives in
        another slot than the agent's keys). The other stores keep nothing a restart empties
        without the file going too, which the checks see.
        """
        ...

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        """Keep a loss found by other means than the marker, and log it; if one stands
        already, that one is returned and nothing changes."""
        ...

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        """Compare-and-set: end the standing loss ``loss_id`` with a new marker that replaces
        the epochs it lost, logging who acknowledged it. None when no loss or another one
        stands (nothing changed)."""
        ...

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` entries of the store's own log, oldest first: markers made,
        losses found and acknowledged. Its entries carry no agent."""
        ...


class Store(RecordStore, Journal, Control, Safety, Approvals, Protocol):
    """Every part at once: what a backend implements, the factory opens and the ledger uses."""

    retention: Retention  # the figures every part keeps things by
