"""The ordering and bounds every backend's batch listing shares (store/batches.py)."""

from __future__ import annotations

from idemproxy.store.batches import MAX_LISTED_BATCHES, BatchStart, batch_starts, newest_first
from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState


def record(effect_id: str, batch: str, created_ms: int) -> EffectRecord:
    return EffectRecord(
        key=RecordKey("agent", effect_id),
        state=RecordState.COMPLETED,
        fence=1,
        fingerprint="fp",
        meta=EffectMeta(batch=batch),
        created_ms=created_ms,
    )


def test_newest_first_breaks_ties_by_batch_id_descending() -> None:
    starts = [BatchStart("a", 5), BatchStart("c", 9), BatchStart("b", 9)]
    assert newest_first(starts, 10) == [BatchStart("c", 9), BatchStart("b", 9), BatchStart("a", 5)]


def test_newest_first_is_bounded_by_the_limit_and_the_cap() -> None:
    starts = [BatchStart(f"b{i}", i) for i in range(MAX_LISTED_BATCHES + 10)]
    assert newest_first(starts, 2) == [starts[-1], starts[-2]]
    assert newest_first(starts, -1) == []
    assert len(newest_first(starts, MAX_LISTED_BATCHES * 2)) == MAX_LISTED_BATCHES


def test_a_batch_starts_with_its_earliest_record_and_no_batch_is_none() -> None:
    records = [record("e1", "b", 30), record("e2", "b", 10), record("e3", "", 1)]
    records.append(record("e4", "c", 20))
    assert sorted(batch_starts(records), key=lambda s: s.batch) == [
        BatchStart("b", 10),
        BatchStart("c", 20),
    ]
