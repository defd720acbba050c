"""Tables of the SQLite store and the rows they hold; called only on the store's own thread.

::

    records  one row per (agent, effect_id): the record, its response and ``expires_ms``
    events   the outbox; ``id`` (AUTOINCREMENT, never reused) is the event id, printed as
             20 zero-padded digits so that ids compare as text in the order they were written
    fences   the last fencing token handed out per agent, so that a record claimed again after
             its predecessor expired still gets a fence above every earlier one
    clock    the anchor of the file's steady clock for the host's current boot (store/clock.py)

and the ledger's tables of :mod:`.journal` (schema 2 added them), the worklists of
:mod:`.worklist` (schema 3) and the events' ``extra`` with the approvals of :mod:`.approvals`
(schema 4), all gained by an older file when it is opened, and the agents' controls of
:mod:`.control`, the store's marker of :mod:`.safety` and the batches' archives of outcomes
of :mod:`.outcomes` (made when a file is opened that lacks them).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from idemproxy.store.errors import StoreCorrupt, StoreNotFound
from idemproxy.store.sqlite import approvals, control, journal, outcomes, safety, worklist

# 4: events carry ``extra`` and the approvals table exists. A proxy of schema 3 could not read
# an approval's events (their types are new to it), so it is told the file is newer instead.
SCHEMA_VERSION = 4

_TABLES = (
    """CREATE TABLE IF NOT EXISTS records (
        agent TEXT NOT NULL, effect_id TEXT NOT NULL, state TEXT NOT NULL,
        fence INTEGER NOT NULL, fingerprint TEXT NOT NULL,
        batch TEXT NOT NULL, tool_call TEXT NOT NULL, action TEXT NOT NULL,
        upstream TEXT NOT NULL, method TEXT NOT NULL, path TEXT NOT NULL,
        lease_expires_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL, attempts INTEGER NOT NULL,
        status INTEGER, headers BLOB, body BLOB, body_truncated INTEGER NOT NULL,
        external_id TEXT NOT NULL, reason TEXT NOT NULL, expires_ms INTEGER NOT NULL,
        PRIMARY KEY (agent, effect_id))""",
    "CREATE INDEX IF NOT EXISTS records_batch ON records (agent, batch, created_ms)",
    "CREATE INDEX IF NOT EXISTS records_state ON records (agent, state, updated_ms)",
    "CREATE INDEX IF NOT EXISTS records_expiry ON records (expires_ms)",
    """CREATE TABLE IF NOT EXISTS events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, effect_id TEXT NOT NULL,
        type TEXT NOT NULL, batch TEXT NOT NULL, tool_call TEXT NOT NULL,
        action TEXT NOT NULL, upstream TEXT NOT NULL, method TEXT NOT NULL,
        path TEXT NOT NULL, status INTEGER NOT NULL, external_id TEXT NOT NULL,
        reason TEXT NOT NULL, ts_ms INTEGER NOT NULL, state TEXT NOT NULL DEFAULT '',
        extra BLOB NOT NULL DEFAULT '')""",
    "CREATE INDEX IF NOT EXISTS events_agent ON events (agent, id)",
    "CREATE INDEX IF NOT EXISTS events_age ON events (ts_ms)",
    # Added without a schema bump: older proxies ignore it, and a file without it gains it.
    """CREATE TABLE IF NOT EXISTS fences (
        agent TEXT PRIMARY KEY, fence INTEGER NOT NULL, touched_ms INTEGER NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS clock (boot_id TEXT NOT NULL, offset_ms INTEGER NOT NULL)",
)


def connect(path: Path, busy_timeout_ms: int, *, create: bool = True) -> sqlite3.Connection:
    """Open the file, switch it to WAL and create the tables if they are missing.

    Without ``create`` the file must be a store already: :class:`StoreNotFound` if there is
    no file (none is made) or it holds none of the store's tables (none are added).
    """
    if create:
        db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    else:
        db = _open_existing(path, busy_timeout_ms)
    try:
        db.row_factory = sqlite3.Row
        if not create:
            _check_is_store(db, path)
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # WAL lets readers (other proxies, the CLI) run while one process writes.
        _switch_to_wal(db, busy_timeout_ms)
        # FULL syncs the WAL at every commit. NORMAL would be faster but a power cut could then
        # lose the last commits: a completed effect forgotten is an effect done twice on retry.
        db.execute("PRAGMA synchronous = FULL")
        db.execute("BEGIN IMMEDIATE")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreCorrupt(f"{path} has schema {version}, newer than {SCHEMA_VERSION}")
        tables = (
            *_TABLES,
            *journal.TABLES,
            *control.TABLES,
            *safety.TABLES,
            *worklist.TABLES,
            *outcomes.TABLES,
            *approvals.TABLES,
        )
        for statement in tables:
            db.execute(statement)
        if version < SCHEMA_VERSION:
            _add_event_extra(db)
            journal.backfill(db)
            worklist.backfill(db)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


def _add_event_extra(db: sqlite3.Connection) -> None:
    """Give the events table of a file older than schema 4 its ``extra`` column."""
    columns = {row["name"] for row in db.execute("PRAGMA table_info(events)")}
    if "extra" not in columns:
        db.execute("ALTER TABLE events ADD COLUMN extra BLOB NOT NULL DEFAULT ''")


def _open_existing(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The file at ``path`` opened read-write, never created (``mode=rw``)."""
    if not path.is_file():
        raise StoreNotFound(f"no store at {path.resolve()}: the file does not exist")
    uri = path.resolve().as_uri() + "?mode=rw"
    try:
        return sqlite3.connect(uri, uri=True, isolation_level=None, timeout=busy_timeout_ms / 1000)
    except sqlite3.OperationalError as exc:
        # Gone between the check and the open, or not readable: no store to use either way.
        raise StoreNotFound(f"no store at {path.resolve()}: {exc}") from exc


def _check_is_store(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a SQLite file that holds none of the store's tables, before writing to it."""
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'"
    ).fetchone()
    if found is None:
        raise StoreNotFound(
            f"no store at {path.resolve()}: the file is not an idemproxy store (it has none"
            " of its tables)"
        )


def _switch_to_wal(db: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process doing the same.

    The switch of a new file takes a lock SQLite's busy timeout does not wait for: a second
    process opening the file in that moment (workers starting together, a proxy and the CLI)
    would be told "database is locked" at once. It is tried again until the busy timeout.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause_s = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.05)
