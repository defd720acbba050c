"""Tables of the SQLite store and the rows they hold; called only on the store's own thread.

::

    records  one row per (agent, effect_id): the record, its response and ``expires_ms``
    events   the outbox; ``id`` (AUTOINCREMENT, never reused) is the event id, printed as
             20 zero-padded digits so that ids compare as text in the order they were written
    fences   the last fencing token handed out per agent, so that a record claimed again after
             its predecessor expired still gets a fence above every earlier one
    clock    the anchor of the file's steady clock for the host's current boot (store/clock.py)

and the ledger's tables of :mod:`.sqlite_journal` (schema 2 added them) and the worklists of
:mod:`.sqlite_worklist` (schema 3), both gained by an older file when it is opened, and the
agents' controls of :mod:`.sqlite_control` and the store's marker of :mod:`.sqlite_safety`
(made when a file is opened that lacks them).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from idemproxy.store import clock, sqlite_control, sqlite_journal, sqlite_safety, sqlite_worklist
from idemproxy.store.base import StoreCorrupt, StoreNotFound
from idemproxy.store.headers import dump_headers, load_headers
from idemproxy.store.records import (
    EffectEvent,
    EffectMeta,
    EffectRecord,
    EventType,
    RecordKey,
    RecordState,
    StoredResponse,
)
from idemproxy.store.retention import FENCE_RETENTION_MS
from idemproxy.store.work import Work

SCHEMA_VERSION = 3

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
        reason TEXT NOT NULL, ts_ms INTEGER NOT NULL, state TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX IF NOT EXISTS events_agent ON events (agent, id)",
    "CREATE INDEX IF NOT EXISTS events_age ON events (ts_ms)",
    # Added without a schema bump: older proxies ignore it, and a file without it gains it.
    """CREATE TABLE IF NOT EXISTS fences (
        agent TEXT PRIMARY KEY, fence INTEGER NOT NULL, touched_ms INTEGER NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS clock (boot_id TEXT NOT NULL, offset_ms INTEGER NOT NULL)",
)

# Spliced into SQL text below (hence the S608 waivers): a constant, never user input.
_RECORD_COLUMNS = (
    "agent, effect_id, state, fence, fingerprint, batch, tool_call, action, upstream, method,"
    " path, lease_expires_ms, created_ms, updated_ms, attempts, status, headers, body,"
    " body_truncated, external_id, reason, expires_ms"
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
            *sqlite_journal.TABLES,
            *sqlite_control.TABLES,
            *sqlite_safety.TABLES,
            *sqlite_worklist.TABLES,
        )
        for statement in tables:
            db.execute(statement)
        if version < SCHEMA_VERSION:
            sqlite_journal.backfill(db)
            sqlite_worklist.backfill(db)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


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


def clock_offset(db: sqlite3.Connection) -> int:
    """The offset of the file's steady clock (:class:`~idemproxy.store.clock.SteadyClock`).

    Anchored once per boot of the host, so every process on the file reads the same time; a new
    boot anchors to the wall clock again, but never behind a time the file already holds, so the
    store's time does not run backwards across a reboot either.
    """
    current = clock.boot_id()
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT boot_id, offset_ms FROM clock").fetchone()
        if row is not None and current and row[0] == current:
            offset = int(row[1])
        else:
            latest = db.execute(
                "SELECT MAX(t) FROM (SELECT MAX(updated_ms) AS t FROM records"
                " UNION ALL SELECT MAX(ts_ms) FROM events)"
            ).fetchone()[0]
            offset = max(clock.wall_ms(), (latest or 0) + 1) - clock.boot_ms()
            db.execute("DELETE FROM clock")
            db.execute("INSERT INTO clock (boot_id, offset_ms) VALUES (?, ?)", (current, offset))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return offset


def load(db: sqlite3.Connection, key: RecordKey, now_ms: int) -> tuple[EffectRecord, int] | None:
    """The live record and its ``expires_ms``; a record past its TTL counts as absent."""
    row = db.execute(
        f"SELECT {_RECORD_COLUMNS} FROM records WHERE agent = ? AND effect_id = ?",  # noqa: S608
        (key.agent, key.effect_id),
    ).fetchone()
    if row is None or row["expires_ms"] <= now_ms:
        return None
    return decode_record(row), row["expires_ms"]


def select(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> list[EffectRecord]:
    """Records matching a fixed ``WHERE ... ORDER BY`` clause written by the store."""
    rows = db.execute(f"SELECT {_RECORD_COLUMNS} FROM records {where}", params)  # noqa: S608
    return [decode_record(row) for row in rows]


def save(db: sqlite3.Connection, record: EffectRecord, expires_ms: int) -> None:
    """Insert or overwrite the record's row."""
    response, meta = record.response, record.meta
    db.execute(
        f"INSERT OR REPLACE INTO records ({_RECORD_COLUMNS})"  # noqa: S608
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.key.agent,
            record.key.effect_id,
            record.state.value,
            record.fence,
            record.fingerprint,
            meta.batch,
            meta.tool_call,
            meta.action,
            meta.upstream,
            meta.method,
            meta.path,
            record.lease_expires_ms,
            record.created_ms,
            record.updated_ms,
            record.attempts,
            response.status if response else None,
            dump_headers(response.headers) if response else None,
            response.body if response else None,
            int(response.body_truncated) if response else 0,
            record.external_id,
            record.reason,
            expires_ms,
        ),
    )


def append_event(
    db: sqlite3.Connection, record: EffectRecord, type_: EventType, now_ms: int
) -> None:
    """Add the record's current state to the outbox; its agent goes on delivery's worklist."""
    sqlite_worklist.add(db, record.key.agent, Work.DELIVERY)
    meta = record.meta
    db.execute(
        "INSERT INTO events (agent, effect_id, type, batch, tool_call, action, upstream, method,"
        " path, status, external_id, reason, ts_ms, state)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.key.agent,
            record.key.effect_id,
            type_.value,
            meta.batch,
            meta.tool_call,
            meta.action,
            meta.upstream,
            meta.method,
            meta.path,
            record.response.status if record.response else 0,
            record.external_id,
            record.reason,
            now_ms,
            record.state.value,
        ),
    )


def read_events(db: sqlite3.Connection, agent: str, after_id: int, limit: int) -> list[EffectEvent]:
    """The agent's events with ``id`` above ``after_id``, oldest first."""
    rows = db.execute(
        "SELECT * FROM events WHERE agent = ? AND id > ? ORDER BY id LIMIT ?",
        (agent, after_id, limit),
    )
    try:
        return [
            EffectEvent(
                event_id=f"{row['id']:020d}",
                type=EventType(row["type"]),
                key=RecordKey(row["agent"], row["effect_id"]),
                meta=_meta(row),
                status=row["status"],
                external_id=row["external_id"],
                reason=row["reason"],
                ts_ms=row["ts_ms"],
                state=row["state"],
            )
            for row in rows
        ]
    except ValueError as exc:
        raise StoreCorrupt(f"an event of agent {agent!r} cannot be decoded: {exc}") from exc


def next_fence(db: sqlite3.Connection, agent: str, above: int, now_ms: int) -> int:
    """A fence above ``above`` and above every fence the agent's keys ever had."""
    row = db.execute("SELECT fence FROM fences WHERE agent = ?", (agent,)).fetchone()
    fence = max(row[0] if row else 0, above) + 1
    db.execute(
        "INSERT OR REPLACE INTO fences (agent, fence, touched_ms) VALUES (?, ?, ?)",
        (agent, fence, now_ms),
    )
    return int(fence)


def purge(db: sqlite3.Connection, now_ms: int, retention_ms: int) -> None:
    """Delete records past their TTL, delivered events past the retention and long-idle fence
    counters."""
    db.execute("DELETE FROM records WHERE expires_ms <= ?", (now_ms,))
    # An agent with a delivery cursor has a recovery controller waiting: its events after the
    # last one accepted are kept past the retention, until delivered (acked '' keeps them all).
    db.execute(
        "DELETE FROM events WHERE ts_ms < ? AND id <= COALESCE("
        "(SELECT CAST(acked AS INTEGER) FROM cursors WHERE cursors.agent = events.agent), id)",
        (now_ms - retention_ms,),
    )
    db.execute("DELETE FROM fences WHERE touched_ms < ?", (now_ms - FENCE_RETENTION_MS,))


def decode_record(row: sqlite3.Row) -> EffectRecord:
    """A record from its row; :class:`StoreCorrupt` if a value is not what was written."""
    try:
        response = None
        if row["status"] is not None:
            response = StoredResponse(
                status=row["status"],
                headers=load_headers(row["headers"]),
                body=bytes(row["body"]),
                body_truncated=bool(row["body_truncated"]),
            )
        return EffectRecord(
            key=RecordKey(row["agent"], row["effect_id"]),
            state=RecordState(row["state"]),
            fence=row["fence"],
            fingerprint=row["fingerprint"],
            meta=_meta(row),
            lease_expires_ms=row["lease_expires_ms"],
            created_ms=row["created_ms"],
            updated_ms=row["updated_ms"],
            attempts=row["attempts"],
            response=response,
            external_id=row["external_id"],
            reason=row["reason"],
        )
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"effect record {row['agent']}/{row['effect_id']}: {exc}") from exc


def _meta(row: sqlite3.Row) -> EffectMeta:
    return EffectMeta(
        batch=row["batch"],
        tool_call=row["tool_call"],
        action=row["action"],
        upstream=row["upstream"],
        method=row["method"],
        path=row["path"],
    )
