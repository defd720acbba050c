"""The marker, loss and log of the memory store (store/safety.py), kept in the process."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from idemproxy.store.journal import AuditEntry
from idemproxy.store.safety import (
    LOG_LIMIT,
    Durability,
    Loss,
    LossKind,
    Marker,
    MarkerCheck,
    acknowledged,
    acknowledgement_entry,
    loss_entry,
    marked_entry,
    next_check,
)

MEMORY_DURABILITY = Durability(
    eviction_policy="noeviction",
    persistent=False,
    persistence="memory:// keeps records inside this process: they are gone when it stops",
)


def fresh_id() -> str:
    return uuid.uuid4().hex


class MemoryMarker:
    """What the memory store keeps of its marker; nothing of it survives the process."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self._marker: Marker | None = None
        self._loss: Loss | None = None
        self._log: list[AuditEntry] = []
        self._next_entry = 0

    def check(self, seen: Marker | None) -> MarkerCheck:
        now_ms = self._clock_ms()
        found = next_check(self._marker, self._loss, bool(self._log), seen, now_ms, fresh_id())
        if found.detected and found.loss is not None:
            self._loss = found.loss
            self._append(loss_entry(found.loss), now_ms)
        elif found.loss is None and found.marker is not None:
            self._marker = found.marker
            if found.created:
                self._append(marked_entry(found.marker), now_ms)
        return found

    def record_loss(self, kind: LossKind, detail: str) -> Loss:
        if self._loss is None:
            now_ms = self._clock_ms()
            epochs = (self._marker.epoch,) if self._marker is not None else ()
            self._loss = Loss(fresh_id(), now_ms, kind, epochs, detail)
            self._append(loss_entry(self._loss), now_ms)
        return self._loss

    def acknowledge(self, loss_id: str, actor: str, note: str) -> Marker | None:
        loss = self._loss
        if loss is None or loss.loss_id != loss_id:
            return None
        now_ms = self._clock_ms()
        self._marker = acknowledged(self._marker, loss, now_ms, fresh_id())
        self._loss = None
        self._append(acknowledgement_entry(actor, note, loss, self._marker), now_ms)
        return self._marker

    def read_log(self, limit: int) -> list[AuditEntry]:
        return self._log[-limit:] if limit > 0 else []

    def _append(self, entry: AuditEntry, now_ms: int) -> None:
        self._next_entry += 1
        entry_id = f"{self._next_entry:020d}"
        self._log.append(dataclasses.replace(entry, ts_ms=now_ms, entry_id=entry_id))
        del self._log[:-LOG_LIMIT]
