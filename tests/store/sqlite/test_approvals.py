"""What only the SQLite store's approvals have: a file of schema 3 gains them, and the purge
deletes settled ones kept long enough."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from idemproxy.store.approvals import ApprovalState, HoldRequest
from idemproxy.store.records import EffectMeta, EventType, RecordKey
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.sqlite import approvals as sqlite_approvals
from idemproxy.store.sqlite import schema as sqlite_schema
from tests.store.test_contract import claim_request

REQUEST = HoldRequest(RecordKey("agent", "e1"), "fp", EffectMeta(), "rule", "summary", 0, 1000)


async def test_a_file_of_schema_3_gains_the_approvals_and_keeps_its_events(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    await store.claim(claim_request(RecordKey("agent", "e0")))
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("DROP TABLE approvals")
        db.execute("ALTER TABLE events DROP COLUMN extra")  # as schema 3 wrote the file
        db.execute("PRAGMA user_version = 3")
        db.commit()

    store = SQLiteStore(path)
    try:
        approval = await store.hold(REQUEST)
        *_, event = await store.read_events("agent")
        assert event.type is EventType.APPROVAL_REQUESTED
        assert event.extra == {"approval_id": approval.approval_id, "rule": "rule"}
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == sqlite_schema.SCHEMA_VERSION


async def test_the_purge_deletes_settled_approvals_past_their_keep(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    await store.hold(REQUEST)
    await store.hold(HoldRequest(RecordKey("agent", "e2"), "fp", EffectMeta(), "r", "s", 0, 1000))
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.row_factory = sqlite3.Row
        db.execute(
            "UPDATE approvals SET state = ?, expires_ms = 5 WHERE effect_id = 'e1'",
            (ApprovalState.USED.value,),
        )
        sqlite_approvals.purge(db, now_ms=5)
        assert [row["effect_id"] for row in db.execute("SELECT * FROM approvals")] == ["e2"]
