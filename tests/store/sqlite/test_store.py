"""What only the SQLite store has: a file that outlives the process and may be shared."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from idemproxy.store.records import Claimed, EventType, RecordKey, RecordState, Standing
from idemproxy.store.sqlite import SQLiteStore
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
