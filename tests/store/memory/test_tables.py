"""What the memory store's parts share: records that expire on sight, fences that only grow."""

from __future__ import annotations

from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory.tables import MemoryTables
from idemproxy.store.records import EffectMeta, EffectRecord, EventType, RecordKey, RecordState

KEY = RecordKey("agent", "e1")


def record(fence: int = 1) -> EffectRecord:
    return EffectRecord(KEY, RecordState.COMPLETED, fence, "fp", EffectMeta())


def test_a_record_past_its_expiry_is_gone_once_looked_at() -> None:
    tables = MemoryTables(lambda: 0)
    tables.records[KEY] = (record(), 1_000)
    assert tables.live(KEY, 999) == record()
    assert tables.live(KEY, 1_000) is None
    assert KEY not in tables.records


def test_a_fence_is_above_every_fence_the_agent_had() -> None:
    tables = MemoryTables(lambda: 0)
    assert tables.next_fence("agent", 0) == 1
    assert tables.next_fence("agent", 0) == 2  # an expired record's fence is not handed out
    assert tables.next_fence("agent", 7) == 8
    assert tables.next_fence("other", 0) == 1


def test_events_and_audit_entries_share_one_order() -> None:
    tables = MemoryTables(lambda: 5)
    tables.emit(record(), EventType.COMPLETED, 5)
    entry = tables.append_audit(AuditEntry("agent", "agent.pause", "alice", "agent"), 5)
    [event] = tables.events["agent"]
    assert event.event_id < entry.entry_id
    assert (event.ts_ms, entry.ts_ms) == (5, 5)
