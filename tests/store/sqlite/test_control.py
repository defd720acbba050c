"""What only the SQLite store's agent controls have: they are forgotten with the agent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from idemproxy.store.clock import wall_ms
from idemproxy.store.control import AgentControl
from idemproxy.store.records import RecordKey, RecordState, Settlement
from idemproxy.store.retention import CONTROL_RETENTION_S
from idemproxy.store.sqlite import SQLiteStore
from idemproxy.store.sqlite import control as sqlite_control
from tests.store.test_control_contract import LIMIT, attempt


async def test_a_pause_and_its_snapshot_outlive_a_restart_but_not_the_retention(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    lost = Settlement(RecordState.UNKNOWN, reason="lost")
    for index in range(LIMIT):
        await attempt(store, RecordKey("bot", f"e{index}"), lost)
    await store.close()

    reopened = SQLiteStore(path)
    kept = await reopened.read_control("bot")
    await reopened.close()
    assert kept.pause is not None
    assert len(kept.snapshot) == LIMIT

    with sqlite3.connect(path) as db:
        sqlite_control.purge(
            db, wall_ms() + CONTROL_RETENTION_S * 1000 + 1, CONTROL_RETENTION_S * 1000
        )
    forgotten = SQLiteStore(path)
    try:
        assert await forgotten.read_control("bot") == AgentControl()
    finally:
        await forgotten.close()
