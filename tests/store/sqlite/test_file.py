"""What the SQLite store's file object does: one thread for the connection, errors translated."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from idemproxy.store.errors import StoreCorrupt, StoreUnavailable
from idemproxy.store.records import RecordKey
from idemproxy.store.sqlite import SQLiteStore
from tests.store.test_contract import claim_request


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


async def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    await store.ping()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.claim(claim_request(RecordKey("agent", "e1")))
