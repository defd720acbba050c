"""In-process store for tests and demos: the reference semantics, nothing survives a restart."""

from __future__ import annotations

from collections.abc import Callable

from idemproxy.store.clock import SteadyClock
from idemproxy.store.composed import ComposedStore
from idemproxy.store.memory.approvals import MemoryApprovals
from idemproxy.store.memory.control import MemoryControl
from idemproxy.store.memory.journal import MemoryJournal
from idemproxy.store.memory.records import MemoryRecords
from idemproxy.store.memory.safety import MemorySafety
from idemproxy.store.memory.tables import MemoryTables
from idemproxy.store.retention import DEFAULT_RETENTION, Retention


class MemoryStore(ComposedStore):
    """One part per protocol over the same tables. Nothing here outlives the process, so of
    ``retention`` only the archives' figure matters: the rest is kept while it runs."""

    def __init__(
        self, clock_ms: Callable[[], int] | None = None, retention: Retention = DEFAULT_RETENTION
    ) -> None:
        clock: Callable[[], int] = clock_ms or SteadyClock()
        self._tables = tables = MemoryTables(clock, retention)
        parts = MemoryJournal(tables), MemoryControl(tables), MemorySafety(clock)
        super().__init__(
            MemoryRecords(tables), *parts, approvals=MemoryApprovals(tables), retention=retention
        )
