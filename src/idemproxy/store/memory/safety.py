"""The memory store's marker, loss and log (:class:`~idemproxy.store.protocols.Safety`), kept
in the process: nothing of it survives the process, and nothing empties it under a running one.
"""

from __future__ import annotations

import dataclasses
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
    fresh_id,
    loss_entry,
    marked_entry,
    next_check,
)

MEMORY_DURABILITY = Durability(
    eviction_policy="noeviction",
    persistent=False,
    persistence="memory:// keeps records inside this process: they are gone when it stops",
)


class MemorySafety:
    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self._clock_ms = clock_ms
        self._marker: Marker | None = None
        self._loss: Loss | None = None
        self._log: list[AuditEntry] = []
        self._next_entry = 0

    async def durability(self) -> Durability:
        return MEMORY_DURABILITY

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
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

    def expect_marker(self, marker: Marker | None) -> None:
        return None  # nothing here is emptied under an open store: the checks see the file go

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        if self._loss is None:
            now_ms = self._clock_ms()
            epochs = (self._marker.epoch,) if self._marker is not None else ()
            self._loss = Loss(fresh_id(), now_ms, kind, epochs, detail)
            self._append(loss_entry(self._loss), now_ms)
        return self._loss

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        loss = self._loss
        if loss is None or loss.loss_id != loss_id:
            return None
        now_ms = self._clock_ms()
        self._marker = acknowledged(self._marker, loss, now_ms, fresh_id())
        self._loss = None
        self._append(acknowledgement_entry(actor, note, loss, self._marker), now_ms)
        return self._marker

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return self._log[-limit:] if limit > 0 else []

    def _append(self, entry: AuditEntry, now_ms: int) -> None:
        self._next_entry += 1
        entry_id = f"{self._next_entry:020d}"
        self._log.append(dataclasses.replace(entry, ts_ms=now_ms, entry_id=entry_id))
        del self._log[:-LOG_LIMIT]
