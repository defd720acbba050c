"""In-process store for tests and demos: the reference semantics, nothing survives a restart."""

from __future__ import annotations

from collections.abc import Callable

from idemproxy.store.clock import SteadyClock
from idemproxy.store.composed import ComposedStore
from idemproxy.store.memory.control import MemoryControl
from idemproxy.store.memory.journal import MemoryJournal
from idemproxy.store.memory.records import MemoryRecords
from idemproxy.store.memory.safety import MemorySafety
from idemproxy.store.memory.tables import MemoryTables


class MemoryStore(ComposedStore):
    """One part per protocol over the same tables."""

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        clock: Callable[[], int] = clock_ms or SteadyClock()
        self._tables = tables = MemoryTables(clock)
        parts = MemoryJournal(tables), MemoryControl(tables), MemorySafety(clock)
        super().__init__(MemoryRecords(tables), *parts)
