"""What only the SQLite store's worklists have: a file from before them gains them, complete."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from idemproxy.store.records import RecordKey
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.work import Work
from tests.store.test_contract import claim_request, completed


async def test_a_file_from_before_the_worklists_lists_its_agents_with_work(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    await store.claim(claim_request(RecordKey("in-flight", "e1")))
    await store.claim(claim_request(RecordKey("settled", "e1")))
    await store.settle(RecordKey("settled", "e1"), 1, completed())
    await store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE busy")  # as schema 2 wrote the file
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()

    store = SQLiteStore(path)
    try:
        await store.forget_agents()
        assert await store.list_busy_agents(Work.REVIEW) == ["in-flight"]
        assert await store.list_busy_agents(Work.DELIVERY) == ["in-flight", "settled"]
    finally:
        await store.close()
