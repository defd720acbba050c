"""The SQLite store's one file: its connection, the thread that owns it, and its clock.

All work runs on one dedicated thread that owns the connection, so the event loop never waits
on disk. Each state change is one ``BEGIN IMMEDIATE`` transaction (:meth:`SQLiteFile.write`);
several proxy processes may share the file (they queue on the write lock for up to the busy
timeout). Expired rows are invisible at once and purged now and then, inside a write.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from idemproxy.store import clock
from idemproxy.store.clock import SteadyClock
from idemproxy.store.errors import StoreCorrupt, StoreUnavailable

T = TypeVar("T")

PURGE_INTERVAL_S = 60

# Opens the file (made and migrated where the store may create it): store/sqlite/schema.py.
Connect = Callable[[], sqlite3.Connection]
# Deletes what is past its retention, given the store's time, inside a write.
Purge = Callable[[sqlite3.Connection, int], None]
FileIdentity = tuple[int, int]


class SQLiteFile:
    """Runs functions on the file's own thread, where the connection lives."""

    def __init__(self, path: Path, connect: Connect, purge: Purge) -> None:
        """Nothing is opened until the first call, and then on the file's own thread."""
        self.path = path
        self._connect = connect
        self._purge = purge
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="idemproxy-sqlite")
        self._closed = False
        # Touched only on the worker thread.
        self._db: sqlite3.Connection | None = None
        self._clock = SteadyClock()  # anchored in the file once it is open
        self._next_purge_ms = 0
        self._identity: FileIdentity | None = None  # of the file self._db has open

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(db)`` on the file's thread, its errors translated into the store's."""
        if self._closed:
            raise StoreUnavailable("the sqlite store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._on_worker, fn)
        except sqlite3.OperationalError as exc:
            # Locked past busy_timeout, unreadable file, full disk: the store cannot serve now.
            raise StoreUnavailable(f"sqlite store {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreCorrupt(f"sqlite store {self.path}: {exc}") from exc

    async def read(self, fn: Callable[[sqlite3.Connection, int], T]) -> T:
        """``fn(db, now_ms)`` on the file's thread, outside a transaction."""
        return await self.run(lambda db: fn(db, self.now_ms()))

    async def write(self, fn: Callable[[sqlite3.Connection, int], T]) -> T:
        """``fn(db, now_ms)`` in one immediate transaction: all of it is written or none."""
        return await self.run(lambda db: self.transaction(db, fn))

    def _on_worker(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._db is None:
            db = self._connect()
            try:
                self._clock = SteadyClock(clock_offset(db))
            except BaseException:
                db.close()
                raise
            self._db = db
        return fn(self._db)

    def now_ms(self) -> int:
        """The store's time; read on the worker thread, where the file's anchor is known."""
        return self._clock()

    def transaction(self, db: sqlite3.Connection, fn: Callable[[sqlite3.Connection, int], T]) -> T:
        """Run ``fn(db, now_ms)`` in one immediate transaction, on the worker thread."""
        db.execute("BEGIN IMMEDIATE")
        try:
            # Read the clock once the write lock is held, so times follow commit order.
            now_ms = self.now_ms()
            result = fn(db, now_ms)
            if now_ms >= self._next_purge_ms:
                self._purge(db, now_ms)
                self._next_purge_ms = now_ms + PURGE_INTERVAL_S * 1000
        except BaseException:
            # SQLite itself rolls back on some errors (a full disk, an I/O error).
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    def followed(self, db: sqlite3.Connection) -> sqlite3.Connection:
        """The connection to the file now at the store's path, reopened if the file was
        replaced since it was opened: the marker is then checked where every other process
        sharing the path reads and writes, not in a file only this one still holds."""
        identity = file_identity(self.path)
        if identity is not None and (self._identity is None or identity == self._identity):
            self._identity = identity
            return db
        db.close()
        self._db = None
        db = self._db = self._connect()
        self._identity = file_identity(self.path)
        return db

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Straight onto the worker, not through run(): closing must not open the file first.
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close_db)
        self._executor.shutdown(wait=True)

    def _close_db(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


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


def file_identity(path: Path) -> FileIdentity | None:
    """The device and inode of the file at ``path``; None if there is none."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino
