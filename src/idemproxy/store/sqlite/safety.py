"""Tables of the SQLite store's marker (store/safety.py); called only on the store's own thread,
inside its transactions::

    store_marker  at most one row: the marker (epoch, created_ms, checks, replaces)
    store_loss    at most one row: a loss found and not yet acknowledged
    store_log     the store's own log; ``id`` (AUTOINCREMENT) is the entry id

A file replaced under a running proxy (a new, empty one renamed over it, or the file deleted and
made again) is found by its identity (device and inode): the store then opens the file at its
path, as every other process does, and the check finds its marker missing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from idemproxy.store.errors import StoreCorrupt
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
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.sqlite.journal import audit_entry

TABLES = (
    """CREATE TABLE IF NOT EXISTS store_marker (
        one INTEGER PRIMARY KEY CHECK (one = 1), epoch TEXT NOT NULL,
        created_ms INTEGER NOT NULL, checks INTEGER NOT NULL, replaces TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS store_loss (
        one INTEGER PRIMARY KEY CHECK (one = 1), loss_id TEXT NOT NULL,
        detected_ms INTEGER NOT NULL, kind TEXT NOT NULL, epochs TEXT NOT NULL,
        detail TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS store_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT, action TEXT NOT NULL, actor TEXT NOT NULL,
        target TEXT NOT NULL, before TEXT NOT NULL, after TEXT NOT NULL, note TEXT NOT NULL,
        ts_ms INTEGER NOT NULL)""",
)


def durability(path: Path) -> Durability:
    """A SQLite file never evicts, and the store commits with ``synchronous = FULL``."""
    return Durability(
        eviction_policy="noeviction",
        persistent=True,
        persistence=f"sqlite file {path}, every commit synced to disk (synchronous = FULL)",
    )


def check(db: sqlite3.Connection, seen: Marker | None, now_ms: int) -> MarkerCheck:
    logged = db.execute("SELECT 1 FROM store_log LIMIT 1").fetchone() is not None
    found = next_check(_marker(db), _loss(db), logged, seen, now_ms, fresh_id())
    if found.detected and found.loss is not None:
        _save_loss(db, found.loss)
        append(db, loss_entry(found.loss), now_ms)
    elif found.loss is None and found.marker is not None:
        _save_marker(db, found.marker)
        if found.created:
            append(db, marked_entry(found.marker), now_ms)
    return found


def record_loss(db: sqlite3.Connection, kind: LossKind, detail: str, now_ms: int) -> Loss:
    standing = _loss(db)
    if standing is not None:
        return standing
    marker = _marker(db)
    loss = Loss(fresh_id(), now_ms, kind, (marker.epoch,) if marker else (), detail)
    _save_loss(db, loss)
    append(db, loss_entry(loss), now_ms)
    return loss


def acknowledge(
    db: sqlite3.Connection, loss_id: str, actor: str, note: str, now_ms: int
) -> Marker | None:
    loss = _loss(db)
    if loss is None or loss.loss_id != loss_id:
        return None
    marker = acknowledged(_marker(db), loss, now_ms, fresh_id())
    _save_marker(db, marker)
    db.execute("DELETE FROM store_loss")
    append(db, acknowledgement_entry(actor, note, loss, marker), now_ms)
    return marker


def append(db: sqlite3.Connection, entry: AuditEntry, now_ms: int) -> None:
    cursor = db.execute(
        "INSERT INTO store_log (action, actor, target, before, after, note, ts_ms)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (entry.action, entry.actor, entry.target, entry.before, entry.after, entry.note, now_ms),
    )
    assert cursor.lastrowid is not None
    db.execute("DELETE FROM store_log WHERE id <= ?", (cursor.lastrowid - LOG_LIMIT,))


def read_log(db: sqlite3.Connection, limit: int) -> list[AuditEntry]:
    rows = db.execute(
        "SELECT '' AS agent, * FROM (SELECT * FROM store_log ORDER BY id DESC LIMIT ?) ORDER BY id",
        (max(limit, 0),),
    )
    return [audit_entry(row) for row in rows]


def _marker(db: sqlite3.Connection) -> Marker | None:
    row = db.execute("SELECT * FROM store_marker").fetchone()
    if row is None:
        return None
    replaces = tuple(row["replaces"].split())
    return Marker(row["epoch"], row["created_ms"], row["checks"], replaces)


def _save_marker(db: sqlite3.Connection, marker: Marker) -> None:
    db.execute(
        "INSERT OR REPLACE INTO store_marker (one, epoch, created_ms, checks, replaces)"
        " VALUES (1, ?, ?, ?, ?)",
        (marker.epoch, marker.created_ms, marker.checks, " ".join(marker.replaces)),
    )


def _loss(db: sqlite3.Connection) -> Loss | None:
    row = db.execute("SELECT * FROM store_loss").fetchone()
    if row is None:
        return None
    try:
        kind = LossKind(row["kind"])
    except ValueError as exc:
        raise StoreCorrupt(f"the store's loss record cannot be decoded: {exc}") from exc
    epochs = tuple(row["epochs"].split())
    return Loss(row["loss_id"], row["detected_ms"], kind, epochs, row["detail"])


def _save_loss(db: sqlite3.Connection, loss: Loss) -> None:
    db.execute(
        "INSERT OR REPLACE INTO store_loss (one, loss_id, detected_ms, kind, epochs, detail)"
        " VALUES (1, ?, ?, ?, ?, ?)",
        (loss.loss_id, loss.detected_ms, loss.kind.value, " ".join(loss.epochs), loss.detail),
    )


class SQLiteSafety:
    """The :class:`~idemproxy.store.protocols.Safety` on the marker's tables."""

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file

    async def durability(self) -> Durability:
        return durability(self._file.path)

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        file = self._file
        return await file.run(
            lambda db: file.transaction(file.followed(db), lambda db, now: check(db, seen, now))
        )

    def expect_marker(self, marker: Marker | None) -> None:
        return None  # nothing here is emptied under an open store: the checks see the file go

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self._file.write(lambda db, now: record_loss(db, kind, detail, now))

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self._file.write(lambda db, now: acknowledge(db, loss_id, actor, note, now))

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self._file.run(lambda db: read_log(db, limit))
