"""What only the SQLite store's ledger tables have: the agents list, kept and purged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from idemproxy.store.records import RecordKey, RecordState, Settlement
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.sqlite import journal as sqlite_journal
from idemproxy.store.sqlite import rows as sqlite_rows
from idemproxy.store.sqlite import schema as sqlite_schema
from tests.store.test_contract import claim_request, fence_of

V1_RECORDS = sqlite_schema._TABLES[0]  # the records table as schema 1 wrote it


async def test_a_file_from_before_the_agents_table_lists_its_agents(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.execute(V1_RECORDS)
    columns = "agent, effect_id, state, fence, fingerprint, batch, tool_call, action, upstream,"
    columns += " method, path, lease_expires_ms, created_ms, updated_ms, attempts,"
    columns += " body_truncated, external_id, reason, expires_ms"
    values = "'old-agent', 'e1', 'completed', 1, 'fp', '', '', '', '', '', '', 0, 1, 1, 1, 0,"
    values += " '', '', 99999999999999"
    db.execute(f"INSERT INTO records ({columns}) VALUES ({values})")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()

    store = SQLiteStore(path)
    try:
        assert await store.list_agents() == ["old-agent"]
        assert (await store.get(RecordKey("old-agent", "e1"))) is not None
    finally:
        await store.close()


async def test_the_purge_drops_agents_with_nothing_left(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    gone, kept = RecordKey("gone", "e1"), RecordKey("kept", "e1")
    await store.claim(claim_request(gone, ttl_s=1))
    await store.settle(
        gone, await fence_of(store, gone), Settlement(RecordState.NOT_APPLIED, ttl_s=1)
    )
    await store.claim(claim_request(kept, ttl_s=1))  # in flight: held past every TTL
    await store.close()
    assert sorted(await SQLiteStore(tmp_path / "effects.db").list_agents()) == ["gone", "kept"]

    db = sqlite_schema.connect(tmp_path / "effects.db", 1000)
    later_ms = 2**42  # long after every record here could have expired
    sqlite_rows.purge(db, later_ms, retention_ms=1)  # expired records and every event gone
    sqlite_journal.purge(db, later_ms, 10**15, 10**15)
    assert sqlite_journal.list_agents(db) == ["kept"]  # its held record keeps it listed
    db.close()


async def test_an_event_id_from_elsewhere_is_rejected(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "effects.db")
    try:
        with pytest.raises(ValueError, match="event id"):
            await store.read_events("agent", after="1700000000000-0")
    finally:
        await store.close()
