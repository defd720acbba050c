"""SQLite backend: the embedded default, durable without a server.

One part per protocol (store/protocols.py), each running on the one file (store/sqlite/file.py);
the store is their union. What is not a record is kept as long as ``retention`` says, then
purged with expired records.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

from idemproxy.store.composed import ComposedStore
from idemproxy.store.retention import DEFAULT_RETENTION, Retention
from idemproxy.store.sqlite import approvals, control, journal, outcomes, rows, schema
from idemproxy.store.sqlite.approvals import SQLiteApprovals
from idemproxy.store.sqlite.control import SQLiteControl
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.sqlite.journal import SQLiteJournal
from idemproxy.store.sqlite.records import SQLiteRecords
from idemproxy.store.sqlite.safety import SQLiteSafety

BUSY_TIMEOUT_MS = 5_000


class SQLiteStore(ComposedStore):
    """The :class:`~idemproxy.store.protocols.Store` in one SQLite file: one part per
    protocol, all on the same file."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        retention: Retention = DEFAULT_RETENTION,
        create: bool = True,
    ) -> None:
        """Nothing is opened until the first call, and then on the store's own thread.

        ``create`` makes the file and its tables where there are none (a proxy); without it
        the first call raises :class:`~idemproxy.store.errors.StoreNotFound` instead (the CLI).
        """
        path = Path(path)
        connect = functools.partial(schema.connect, path, busy_timeout_ms, create=create)
        purge = functools.partial(_purge, retention=retention)
        self._file = file = SQLiteFile(path, connect, purge)
        parts = SQLiteJournal(file, retention), SQLiteControl(file), SQLiteSafety(file)
        super().__init__(
            SQLiteRecords(file), *parts, approvals=SQLiteApprovals(file), retention=retention
        )


def _purge(db: sqlite3.Connection, now_ms: int, retention: Retention) -> None:
    """Delete what is past its retention: records, events, fences, then the ledger's rows."""
    rows.purge(db, now_ms, retention.events_ms)
    journal.purge(db, now_ms, retention.audit_ms, retention.archive_ms)
    outcomes.purge(db, now_ms, retention.archive_ms)
    control.purge(db, now_ms, retention.control_ms)
    approvals.purge(db, now_ms)
