"""How the SQLite store opens a file: WAL, made only where it may be, several at once."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from threading import Barrier

import pytest

from idemproxy.store.errors import StoreNotFound, StoreUnavailable
from idemproxy.store.records import RecordKey
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.sqlite import schema as sqlite_schema
from tests.store.test_contract import claim_request


async def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    await store.ping()
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_store_that_must_exist_creates_no_file_where_there_is_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "missing-dir" / "effects.db"
    store = SQLiteStore(path, create=False)
    try:
        with pytest.raises(StoreNotFound, match="does not exist"):
            await store.ping()
    finally:
        await store.close()
    assert not path.parent.exists()


async def test_a_store_that_must_exist_refuses_a_database_that_is_not_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    before = path.read_bytes()
    store = SQLiteStore(path, create=False)
    try:
        with pytest.raises(StoreNotFound, match="not an idemproxy store"):
            await store.ping()
    finally:
        await store.close()
    assert path.read_bytes() == before  # no tables added, not switched to WAL


async def test_a_store_that_must_exist_opens_one_a_proxy_made(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    made = SQLiteStore(path)
    key = RecordKey("agent", "e1")
    await made.claim(claim_request(key))
    await made.close()
    store = SQLiteStore(path, create=False)
    try:
        assert await store.get(key) is not None
    finally:
        await store.close()


def test_processes_opening_a_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Switching a new file to WAL takes a lock that SQLite does not wait for: a second process
    # opening the file in that moment was told "database is locked" at once (workers starting
    # together, a proxy and the CLI).
    for round_ in range(30):
        path = tmp_path / f"new-{round_}.db"
        start = threading.Barrier(6)
        failures: list[BaseException] = []

        def open_it(
            path: Path = path,
            start: threading.Barrier = start,
            failures: list[BaseException] = failures,
        ) -> None:
            start.wait()
            try:
                sqlite_schema.connect(path, 5_000).close()
            except sqlite3.Error as exc:
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []


def _open_new_files(directory: str, rounds: int, start: Barrier) -> list[str]:
    """In a process of its own: open a store on each new file as the other processes do."""

    async def open_store(path: Path) -> None:
        store = SQLiteStore(path)
        try:
            await store.now_ms()  # the first call opens the file: WAL, tables, clock
        finally:
            await store.close()

    failures = []
    for round_ in range(rounds):
        start.wait()
        try:
            asyncio.run(open_store(Path(directory) / f"new-{round_}.db"))
        except StoreUnavailable as exc:
            failures.append(f"round {round_}: {exc}")
    return failures


def test_stores_in_several_processes_opening_a_new_file_at_once_all_open_it(
    tmp_path: Path,
) -> None:
    # Proxy workers start together on one new file: each store's first call must open it, none
    # be told "database is locked" by another's switch of the file to WAL.
    processes, rounds = 4, 60
    context = multiprocessing.get_context("spawn")  # fork is unsafe beside the test's threads
    with context.Manager() as manager, context.Pool(processes) as pool:
        start = manager.Barrier(processes)
        work = [(str(tmp_path), rounds, start)] * processes
        failures = [f for done in pool.starmap(_open_new_files, work) for f in done]
    assert failures == []
