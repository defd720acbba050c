"""What only the SQLite store has: a file that outlives the process and may be shared."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from threading import Barrier

import pytest

from idemproxy.store.errors import StoreCorrupt, StoreNotFound, StoreUnavailable
from idemproxy.store.records import Claimed, EventType, RecordKey, RecordState, Standing
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.sqlite import schema as sqlite_schema
from tests.store.test_contract import claim_request, completed, fence_of


async def test_records_and_events_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    key = RecordKey("agent", "e1")
    store = SQLiteStore(path)
    await store.claim(claim_request(key))
    await store.settle(key, await fence_of(store, key), completed(body=b"\x00kept\xff"))
    before = await store.get(key)
    assert before is not None
    events = await store.read_events("agent")
    await store.close()

    reopened = SQLiteStore(path)
    try:
        assert await reopened.get(key) == before
        assert await reopened.read_events("agent") == events
        assert await reopened.claim(claim_request(key)) == Standing(before)
        later = await reopened.read_events("agent", after=events[-1].event_id)
        assert [event.type for event in later] == [EventType.REPLAYED]
        # Ids go on rising across restarts, and compare as text in that order.
        assert later[0].event_id > events[-1].event_id
        assert len(later[0].event_id) == len(events[-1].event_id)
    finally:
        await reopened.close()


async def test_two_stores_on_one_file_share_records_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    try:
        keys = [RecordKey("agent", f"e{i}") for i in range(10)]
        results = await asyncio.gather(
            *(store.claim(claim_request(key)) for key in keys for store in (first, second))
        )
        assert sum(isinstance(result, Claimed) for result in results) == len(keys)
        assert await first.settle(keys[0], await fence_of(first, keys[0]), completed())
        record = await second.get(keys[0])
        assert record is not None
        assert record.state is RecordState.COMPLETED
        assert len(await second.read_events("agent")) == 1
    finally:
        await first.close()
        await second.close()


async def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    await store.ping()
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_work_runs_off_the_event_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    seen: list[str] = []
    original = store._file._on_worker

    def spy(fn: Callable[[sqlite3.Connection], object]) -> object:
        seen.append(threading.current_thread().name)
        return original(fn)

    monkeypatch.setattr(store._file, "_on_worker", spy)
    try:
        await store.claim(claim_request(RecordKey("agent", "e1")))
        await store.get(RecordKey("agent", "e1"))
    finally:
        await store.close()
    assert len(set(seen)) == 1
    assert seen[0] != threading.current_thread().name


async def test_expired_records_are_purged_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    short = RecordKey("agent", "short")
    await store.claim(claim_request(short, ttl_s=1))
    await store.settle(short, await fence_of(store, short), completed(ttl_s=1))
    await store.close()
    await asyncio.sleep(1.1)
    # A fresh store purges on its first write.
    store = SQLiteStore(path)
    await store.claim(claim_request(RecordKey("agent", "new")))
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT effect_id FROM records").fetchall()
    assert rows == [("new",)]


async def test_a_file_that_is_not_a_database_is_reported_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    path.write_bytes(b"this is not a database, just some text " * 100)
    store = SQLiteStore(path)
    try:
        with pytest.raises(StoreCorrupt):
            await store.get(RecordKey("agent", "e1"))
    finally:
        await store.close()


async def test_an_unwritable_location_is_reported_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing-dir" / "effects.db")
    try:
        with pytest.raises(StoreUnavailable):
            await store.ping()
    finally:
        await store.close()


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


async def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    await store.ping()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.claim(claim_request(RecordKey("agent", "e1")))


async def test_an_event_id_from_elsewhere_is_rejected(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    try:
        with pytest.raises(ValueError, match="event id"):
            await store.read_events("agent", after="1700000000000-0")
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
