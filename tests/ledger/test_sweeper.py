"""The sweep puts a dead proxy's requests in review on its own, and counts the queue."""

from __future__ import annotations

import asyncio
import logging

import fakeredis
import pytest

from idemproxy.ledger.sweeper import Sweeper
from idemproxy.metrics import Metrics
from idemproxy.store.approvals import ApprovalState, DecideRequest, HoldRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EffectMeta,
    EventType,
    RecordKey,
    RecordState,
    Resolution,
    ResolveRequest,
)
from idemproxy.store.redis.store import RedisStore
from tests.ledger.conftest import make_effect

POD = {"store_scope": "pod"}  # the labels of a gauge read from a pod's own store


async def test_lapsed_leases_join_the_review_queue_without_a_repeat(store: Store, ns: str) -> None:
    held = await make_effect(store, ns, "b1", "c1", None, lease_ms=100)
    running = await make_effect(store, ns, "b1", "c2", None)
    await make_effect(store, ns, "b1", "c3", RecordState.UNKNOWN)
    metrics = Metrics()
    await asyncio.sleep(0.2)

    await Sweeper(store, metrics, interval_s=5).sweep_once()

    record = await store.get(held)
    assert record is not None
    assert record.state is RecordState.UNKNOWN
    still = await store.get(running)
    assert still is not None
    assert still.state is RecordState.IN_FLIGHT
    assert [event.type for event in await store.read_events(ns)] == [
        EventType.UNKNOWN,
        EventType.AGENT_ERROR,
        EventType.UNKNOWN,
        EventType.AGENT_ERROR,
    ]
    waiting = metrics.registry.get_sample_value("idemproxy_unknown_outcomes", POD)
    assert waiting is not None
    assert waiting >= 2  # a shared Redis may hold other tests' agents too


async def test_each_lease_the_sweep_turns_unknown_is_audited(store: Store, ns: str) -> None:
    held = await make_effect(store, ns, "b1", "c1", None, lease_ms=100)
    await make_effect(store, ns, "b1", "c2", None)
    await asyncio.sleep(0.2)

    await Sweeper(store, Metrics(), interval_s=5).sweep_once()

    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.actor, entry.target) == ("effect.lapsed", "idemproxy", str(held))
    assert (entry.before, entry.after) == ("in_flight", "unknown")
    assert "b1" in entry.note


async def test_the_sweep_runs_on_its_interval_until_stopped() -> None:
    store = MemoryStore()
    held = await make_effect(store, "bot", "b1", "c1", None, lease_ms=100)
    task = asyncio.create_task(Sweeper(store, Metrics(), interval_s=0.05).run())
    await asyncio.sleep(0.3)
    task.cancel()
    record = await store.get(held)
    assert record is not None
    assert record.state is RecordState.UNKNOWN


async def test_a_full_registry_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    store = RedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()), registry_cap=2)
    for i in range(3):
        await make_effect(store, f"bot-{i}", "b1", "c1", None)
        await asyncio.sleep(0.002)  # each seen a millisecond later than the one before
    metrics = Metrics()

    with caplog.at_level(logging.WARNING, logger="idemproxy.ledger.sweeper"):
        await Sweeper(store, metrics, interval_s=5).sweep_once()

    assert "agent registry full: forgot 1 agent id(s) seen longest ago" in caplog.text
    assert metrics.registry.get_sample_value("idemproxy_agents_forgotten_total") == 1
    assert await store.list_agents() == ["bot-1", "bot-2"]
    # The sweep still visits all three: each has a record in flight.
    busy = metrics.registry.get_sample_value("idemproxy_agents_busy", {"work": "review", **POD})
    assert busy == 3


async def test_agents_in_error_are_counted_and_logged_once_as_they_enter_and_leave(
    store: Store, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    metrics = Metrics()
    sweeper = Sweeper(store, metrics, interval_s=5)
    labels = {"agent": ns, **POD}
    in_error = {"reason": "unknown_outcome", **POD}

    with caplog.at_level(logging.INFO, logger="idemproxy.ledger.sweeper"):
        await sweeper.sweep_once()
        await asyncio.sleep(0.05)
        await sweeper.sweep_once()
        entered = [r.__dict__ for r in caplog.records if r.getMessage().startswith("agent in")]
        entered = [fields for fields in entered if fields["agent"] == ns]
        assert [fields["effect_key"] for fields in entered] == [str(key)]  # once, not per sweep
        assert entered[0]["strategy"] == "manual_only"
        assert (metrics.registry.get_sample_value("idemproxy_agents_in_error", in_error) or 0) >= 1
        seconds = metrics.registry.get_sample_value("idemproxy_agent_error_seconds", labels)
        assert seconds is not None
        assert seconds >= 0.05

        resolution = Resolution(RecordState.NOT_APPLIED)
        await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution))
        await sweeper.sweep_once()

    assert metrics.registry.get_sample_value("idemproxy_agent_error_seconds", labels) == 0
    left = [r.__dict__ for r in caplog.records if r.getMessage() == "agent no longer in error"]
    assert [fields["agent"] for fields in left if fields["agent"] == ns] == [ns]


async def test_an_approval_unused_in_time_expires_in_the_sweep_and_the_waiting_are_counted() -> (
    None
):
    now = [1_000_000]
    store = MemoryStore(clock_ms=lambda: now[0])
    key, meta = RecordKey("bot", "c1"), EffectMeta(upstream="stripe")
    approved = await store.hold(HoldRequest(key, "f1", meta, "always", "{}", 60_000, 1_000))
    await store.hold(HoldRequest(key, "f2", meta, "always", "{}", 60_000, 1_000))
    audit = AuditEntry("bot", "approval.approve", "ops", approved.approval_id)
    await store.decide(DecideRequest("bot", approved.approval_id, True, audit))
    metrics = Metrics()
    now[0] += 1_000
    await Sweeper(store, metrics, interval_s=1).sweep_once()
    expired = await store.get_approval("bot", approved.approval_id)
    assert expired is not None
    assert expired.state is ApprovalState.EXPIRED
    assert (await store.read_events("bot"))[-1].type is EventType.APPROVAL_EXPIRED
    assert (await store.read_audit("bot"))[-1].action == "approval.expired"
    assert metrics.registry.get_sample_value("idemproxy_approvals_waiting", POD) == 1
    sample = {"upstream": "stripe", "event": "expired"}
    assert metrics.registry.get_sample_value("idemproxy_approvals_total", sample) == 1
