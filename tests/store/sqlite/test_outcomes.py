"""The SQLite archive of outcomes: a row per effect, replaced by a later outcome, purged by age."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState
from idemproxy.store.sqlite import outcomes, schema


def record(state: RecordState, effect_id: str = "e") -> EffectRecord:
    return EffectRecord(
        key=RecordKey("a", effect_id),
        state=state,
        fence=1,
        fingerprint="fp",
        meta=EffectMeta(batch="b", tool_call="c"),
        created_ms=1,
        updated_ms=2,
        attempts=1,
    )


def test_outcomes_are_kept_replaced_dropped_and_purged(tmp_path: Path) -> None:
    db = schema.connect(tmp_path / "effects.db", 1000)
    try:
        outcomes.archive(db, record(RecordState.UNKNOWN), 100)  # held: not archived
        assert outcomes.read(db, "a", "b", 0) == []
        outcomes.archive(db, record(RecordState.NOT_APPLIED), 100)
        outcomes.archive(db, record(RecordState.COMPLETED), 200)
        outcomes.archive(db, record(RecordState.COMPLETED, "other"), 300)
        assert [(o.effect_id, o.state) for o in outcomes.read(db, "a", "b", 0)] == [
            ("e", RecordState.COMPLETED),
            ("other", RecordState.COMPLETED),
        ]
        assert [o.effect_id for o in outcomes.read(db, "a", "b", 250)] == ["other"]
        outcomes.drop(db, "a", "b", "other")
        outcomes.purge(db, now_ms=1200, archive_retention_ms=1000)  # "e", written at 200, stays
        assert [o.effect_id for o in outcomes.read(db, "a", "b", 0)] == ["e"]
        outcomes.purge(db, now_ms=1201, archive_retention_ms=1000)
        assert outcomes.read(db, "a", "b", 0) == []
    finally:
        db.close()


def test_an_older_file_gains_the_table(tmp_path: Path) -> None:
    path = tmp_path / "effects.db"
    schema.connect(path, 1000).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE outcomes")
    db2 = schema.connect(path, 1000)
    try:
        assert outcomes.read(db2, "a", "b", 0) == []
    finally:
        db2.close()
