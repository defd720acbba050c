"""Whether a store can lose records, and whether it has (SPEC section 4).

A record the store forgets is an effect the next repeat sends again, so the proxy asks two
questions of its store, at start-up, in ``/readyz`` and every few seconds:

- **Can it lose records?** :class:`Durability`: whether it may evict keys to make room, and
  whether it keeps on disk what it acknowledged.
- **Has it lost records?** The marker: one store-wide entry that never expires, with an epoch
  made when the store was first used and a count of the checks that found it. Each proxy
  remembers the marker it last saw; finding it gone, changed, or its count gone back means the
  store was emptied, replaced, or restored from an older copy. The loss is written into the
  store, so every proxy sharing it (and any started later) sees it, and stands until an
  operator acknowledges it::

      (no marker) --check of a store never marked--> marked (epoch E, checks 1)
      marked --check--> marked (checks + 1)
      marked --check finds it gone, changed or gone back--> lost (a Loss is kept)
      lost --acknowledge (audited)--> marked (a new epoch that replaces the lost ones)

A store's own log (``store.marked``, ``store.loss_detected``, ``store.loss_acknowledged``)
never expires either: a marker missing where the log says one was made is a loss too. A store
with records but neither marker nor log was written before markers existed and is marked.

:func:`next_check` and :func:`acknowledged` are the reference the backends that decide in
Python share, and that the Redis scripts follow.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from enum import StrEnum

from idemproxy.store.journal import AuditEntry

STORE_ACTOR = "idemproxy"
STORE_TARGET = "store"
LOG_LIMIT = 1000  # entries of the store's log kept; older ones are trimmed


class StoreLogAction(StrEnum):
    MARKED = "store.marked"
    LOSS_DETECTED = "store.loss_detected"
    LOSS_ACKNOWLEDGED = "store.loss_acknowledged"


class LossKind(StrEnum):
    MARKER_GONE = "marker_gone"  # a proxy that saw the marker finds none
    MARKER_GONE_LOGGED = "marker_gone_logged"  # none, although the store's log says one was made
    MARKER_CHANGED = "marker_changed"  # another epoch than the one a proxy saw
    WENT_BACK = "went_back"  # the marker's check count is below what a proxy saw
    EVICTED = "evicted"  # the server counted evictions it was not allowed to make


@dataclass(frozen=True, slots=True)
class Durability:
    """What a store says of its own ability to keep records.

    ``eviction_policy`` is ``noeviction`` for a store that never drops a key to make room,
    ``persistent`` says whether it keeps what it acknowledged across a restart; None for
    either: it could not be read. ``persistence`` says what was read of the latter, and how.
    """

    eviction_policy: str | None
    persistent: bool | None
    persistence: str
    evicted_keys: int | None = None  # keys the server evicted since it started, if it counts
    server_id: str = ""  # changes when the server restarts (Redis's run_id), if it says


@dataclass(frozen=True, slots=True)
class Marker:
    epoch: str
    created_ms: int
    checks: int  # checks that found this marker, this one included; only ever grows
    replaces: tuple[str, ...] = ()  # the epochs of the loss it was made to acknowledge


@dataclass(frozen=True, slots=True)
class Loss:
    loss_id: str
    detected_ms: int
    kind: LossKind
    epochs: tuple[str, ...]  # markers it lost: the acknowledgement's marker replaces them
    detail: str = ""

    @property
    def reason(self) -> str:
        """What happened, in a sentence an operator can act on."""
        epochs = " and ".join(self.epochs) or "-"
        return {
            LossKind.MARKER_GONE: f"the store's marker {epochs} is gone: the store was emptied,"
            " or restarted or replaced without its data",
            LossKind.MARKER_GONE_LOGGED: "the store has no marker although its log says one was"
            " made: records were deleted or evicted",
            LossKind.MARKER_CHANGED: f"the store's marker changed ({epochs}): the store was"
            " emptied or replaced, and marked again by a proxy that found it empty",
            LossKind.WENT_BACK: f"the store went back to an earlier state ({self.detail}): it"
            " was restored from an older snapshot, or a replica that lagged took over",
            LossKind.EVICTED: f"Redis evicted {self.detail}, and records may be among them",
        }[self.kind]


@dataclass(frozen=True, slots=True)
class MarkerCheck:
    """What a check found: the marker as it stands (None only while a loss stands without one),
    the loss if one stands, and whether this check made the marker (``created``)."""

    marker: Marker | None
    loss: Loss | None = None
    created: bool = False
    detected: bool = False  # this check found the loss


def fresh_id() -> str:
    """A new epoch or loss id: random, so that no two stores or checks make the same."""
    return uuid.uuid4().hex


def next_check(
    marker: Marker | None,
    loss: Loss | None,
    logged: bool,
    seen: Marker | None,
    now_ms: int,
    fresh_id: str,
) -> MarkerCheck:
    """What a check by a proxy that last saw ``seen`` finds in a store holding ``marker``,
    ``loss`` and (``logged``) a log; ``fresh_id`` names a marker or loss made now.

    The store keeps what the result says: a new marker (``created``), a new loss
    (``detected``), or else the marker it returns, whose count went up by one.
    """
    if loss is not None:
        return MarkerCheck(marker, loss)
    if marker is None:
        if seen is not None:
            return _lost(None, LossKind.MARKER_GONE, (seen.epoch,), now_ms, fresh_id)
        if logged:
            return _lost(None, LossKind.MARKER_GONE_LOGGED, (), now_ms, fresh_id)
        return MarkerCheck(Marker(fresh_id, now_ms, 1), created=True)
    counted = dataclasses.replace(marker, checks=marker.checks + 1)
    if seen is None or seen.epoch in marker.replaces:
        return MarkerCheck(counted)  # first sight, or the marker of an acknowledged loss
    if seen.epoch != marker.epoch:
        epochs = (seen.epoch, marker.epoch)
        return _lost(marker, LossKind.MARKER_CHANGED, epochs, now_ms, fresh_id)
    if counted.checks <= seen.checks:
        detail = went_back_detail(counted.checks, seen.checks)
        return _lost(marker, LossKind.WENT_BACK, (marker.epoch,), now_ms, fresh_id, detail)
    return MarkerCheck(counted)


def went_back_detail(checks: int, seen_checks: int) -> str:
    """How far the store went back (the Redis store writes the same words in Lua)."""
    return f"its marker counts {checks} checks where {seen_checks} were seen"


def _lost(
    marker: Marker | None,
    kind: LossKind,
    epochs: tuple[str, ...],
    now_ms: int,
    fresh_id: str,
    detail: str = "",
) -> MarkerCheck:
    return MarkerCheck(marker, Loss(fresh_id, now_ms, kind, epochs, detail), detected=True)


def acknowledged(marker: Marker | None, loss: Loss, now_ms: int, fresh_id: str) -> Marker:
    """The marker an acknowledgement of ``loss`` makes: it replaces every epoch a proxy may
    still remember, so those proxies take it up instead of finding another loss."""
    lost = (*loss.epochs, *((marker.epoch,) if marker is not None else ()))
    return Marker(fresh_id, now_ms, 1, tuple(dict.fromkeys(lost)))


def loss_entry(loss: Loss) -> AuditEntry:
    """The store's log entry of a loss found."""
    return AuditEntry(
        agent="",
        action=StoreLogAction.LOSS_DETECTED,
        actor=STORE_ACTOR,
        target=STORE_TARGET,
        before=" ".join(loss.epochs),
        after=f"lost ({loss.kind.value})",
        note=loss.reason,
    )


def marked_entry(marker: Marker) -> AuditEntry:
    """The store's log entry of a marker made for a store that had none."""
    return AuditEntry(
        agent="",
        action=StoreLogAction.MARKED,
        actor=STORE_ACTOR,
        target=STORE_TARGET,
        after=marker.epoch,
        note="the store had no marker: marked when first used",
    )


def acknowledgement_entry(actor: str, note: str, loss: Loss, marker: Marker) -> AuditEntry:
    """The store's log entry of an operator's acknowledgement of ``loss``."""
    return AuditEntry(
        agent="",
        action=StoreLogAction.LOSS_ACKNOWLEDGED,
        actor=actor,
        target=STORE_TARGET,
        before=f"lost ({loss.kind.value}) {loss.loss_id}",
        after=marker.epoch,
        note=note,
    )
