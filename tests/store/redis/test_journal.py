"""The ledger's Redis keys stay in the agent's slot, so every journal script runs on a Cluster."""

from __future__ import annotations

import asyncio
from pathlib import Path

import fakeredis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.store.journal import AuditEntry, ClearedRecord, ClearRequest, DeliveryCursor
from idemproxy.store.records import (
    Claimed,
    EventType,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
)
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.work import Work
from tests.store.test_contract import SHORT_LEASE_MS, claim_request, fence_of
from tests.support.cluster import LocalCluster


@given(st.text(), st.text())
def test_ledger_keys_share_the_agent_tag_and_never_collide(agent: str, batch: str) -> None:
    keys = [
        layout.leases_key(agent),
        layout.cursor_key(agent),
        layout.audit_key(agent),
        layout.archive_key(agent, batch),
        layout.outbox_key(agent),
        layout.unknown_key(agent),
        layout.batch_key(agent, batch),
    ]
    assert len(set(keys)) == len(keys)
    assert all(key.startswith(f"{layout.PREFIX}:{layout.agent_tag(agent)}:") for key in keys)
    assert layout.AGENTS_KEY not in keys
    assert not any(key.startswith(f"{layout.PREFIX}:{layout.WORKLIST_TAG}:") for key in keys)


def audit(agent: str, action: str) -> AuditEntry:
    return AuditEntry(agent, action, "ops", "target", "before", "after", "note")


async def exercise_journal(store: RedisStore, agent: str) -> None:
    """Every journal operation once, on one agent."""
    doubt, freed, lapsed = (RecordKey(agent, name) for name in ("u", "f", "l"))
    for key in (doubt, freed):
        assert isinstance(await store.claim(claim_request(key)), Claimed)
    await store.settle(doubt, await fence_of(store, doubt), Settlement(RecordState.UNKNOWN))
    freed_fence = await fence_of(store, freed)
    await store.settle(freed, freed_fence, Settlement(RecordState.NOT_APPLIED))
    resolved = await store.resolve(
        ResolveRequest(
            doubt, RecordState.UNKNOWN, Resolution(RecordState.NOT_APPLIED), audit(agent, "resolve")
        )
    )
    assert isinstance(resolved, Resolved)
    await store.claim(claim_request(lapsed, lease_ms=SHORT_LEASE_MS))
    await asyncio.sleep(0.1)
    assert [record.key for record in await store.sweep_expired(agent)] == [lapsed]
    assert await store.count_events(agent) == 6  # each unknown outcome with its agent.error
    written = await store.write_cursor(agent, DeliveryCursor(owner="p"), audit(agent, "retry"))
    assert written is not None
    assert await store.read_cursor(agent) == written
    await store.append_audit(audit(agent, "note"))
    cleared = await store.clear_batch(
        ClearRequest(
            agent, "batch-1", [ClearedRecord("f", freed_fence)], b"archive", audit(agent, "abandon")
        )
    )
    assert cleared == ["f"]
    assert await store.read_archive(agent, "batch-1") == b"archive"
    assert (await store.read_events(agent))[-1].type is EventType.BATCH_ABANDONED
    actions = [entry.action for entry in await store.read_audit(agent)]
    assert actions == ["resolve", "retry", "note", "abandon"]


@pytest.mark.redis
async def test_journal_operations_run_on_redis_cluster(tmp_path: Path) -> None:
    cluster = LocalCluster.build(tmp_path, replicas=0)
    try:
        cluster.start()
        cluster.wait_ok()
        store = RedisStore.from_url(cluster.url)
        try:
            agents = [f"agent-{i}{{:}}" for i in range(6)]  # spread over the masters
            for agent in agents:
                await exercise_journal(store, agent)
            assert await store.list_agents() == sorted(agents)
            # Each is left with an outcome awaiting review, so no forget drops it.
            for _ in range(2):
                await store.forget_agents()
                assert await store.list_busy_agents(Work.REVIEW) == sorted(agents)
                assert await store.list_busy_agents(Work.DELIVERY) == sorted(agents)
        finally:
            await store.close()
    finally:
        cluster.stop()


async def test_an_event_id_from_elsewhere_is_rejected() -> None:
    store = RedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()))
    try:
        with pytest.raises(ValueError, match="event id"):
            await store.read_events("agent", after="00000000000000000001")
    finally:
        await store.close()
