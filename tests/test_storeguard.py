"""The proxy's verdict on its store: checked when needed, held between checks, and refusing
effects on a store that may lose records or has lost some."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest
from prometheus_client import CollectorRegistry

from idemproxy.config.settings import StoreSafetyConfig
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.metrics import Metrics
from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.memory import MemoryStore
from idemproxy.store.memory.safety import MemorySafety
from idemproxy.store.safety import Durability, LossKind
from idemproxy.storeguard import SafetyStatus, StoreGuard

SAFE = Durability("noeviction", True, "appendonly yes, appendfsync always", 0, "run-1")


class TunableStore(MemoryStore):
    """A memory store that says what the test wants of its durability, and counts the asks."""

    def __init__(self, durability: Durability = SAFE) -> None:
        super().__init__()
        self.said = durability
        self.asked = 0
        self.asks: asyncio.Queue[int] = asyncio.Queue()
        self.failing = False

    async def durability(self) -> Durability:
        self.asked += 1
        self.asks.put_nowait(self.asked)
        if self.failing:
            raise StoreUnavailable("redis unavailable during durability: connection refused")
        await asyncio.sleep(0)  # a real store answers later, so that checks can overlap
        return self.said

    def forget_marker(self) -> None:
        """As a store emptied under the proxy: marker and log gone."""
        self.safety = MemorySafety(self._tables.clock_ms)


def guard_of(store: TunableStore, **settings: bool) -> tuple[StoreGuard, Metrics]:
    metrics = Metrics(CollectorRegistry())
    return StoreGuard(store, StoreSafetyConfig(**settings), metrics), metrics


async def refusal(guard: StoreGuard) -> RequestRefused:
    with pytest.raises(RequestRefused) as raised:
        await guard.admit()
    return raised.value


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_a_safe_store_is_checked_once_then_effects_cost_no_store_call() -> None:
    store = TunableStore()
    guard, _ = guard_of(store)
    assert not guard.admits

    await asyncio.gather(*(guard.admit() for _ in range(10)))  # they share the one check
    for _ in range(100):
        assert guard.admits

    assert store.asked == 1
    assert guard.verdict.status is SafetyStatus.READY
    assert guard.verdict.warnings == ()


async def test_an_evicting_store_refuses_effects_until_it_is_fixed() -> None:
    store = TunableStore(dataclasses.replace(SAFE, eviction_policy="allkeys-lru"))
    guard, metrics = guard_of(store)

    refused = await refusal(guard)
    assert refused.code is ProblemCode.STORE_UNSAFE
    assert "nothing was sent" in refused.detail
    assert "CONFIG SET maxmemory-policy noeviction" in refused.detail
    assert not guard.admits
    assert sample(metrics, "idemproxy_store_risk", risk="eviction", store_scope="pod") == 1

    store.said = SAFE  # CONFIG SET maxmemory-policy noeviction: nothing was evicted
    assert (await guard.check()).status is SafetyStatus.READY
    await guard.admit()
    assert sample(metrics, "idemproxy_store_risk", risk="eviction", store_scope="pod") == 0


async def test_accepted_risks_are_warnings() -> None:
    store = TunableStore(Durability("volatile-lru", False, "appendonly no", 0, "run-1"))
    guard, metrics = guard_of(store, allow_eviction=True)
    await guard.admit()
    assert len(guard.verdict.warnings) == 2
    assert sample(metrics, "idemproxy_store_risk", risk="no_persistence", store_scope="pod") == 1


async def test_required_persistence_refuses_effects_on_a_store_without_it() -> None:
    store = TunableStore(dataclasses.replace(SAFE, persistent=False))
    guard, _ = guard_of(store, require_persistence=True)
    assert (await refusal(guard)).code is ProblemCode.STORE_UNSAFE


async def test_a_store_emptied_under_the_guard_refuses_effects_until_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = TunableStore()
    guard, metrics = guard_of(store)
    await guard.admit()
    store.forget_marker()

    with caplog.at_level(logging.ERROR, logger="idemproxy.storeguard"):
        verdict = await guard.check()
    refused = await refusal(guard)

    assert verdict.status is SafetyStatus.RECORDS_LOST
    assert verdict.loss is not None
    assert verdict.loss.kind is LossKind.MARKER_GONE
    assert refused.code is ProblemCode.STORE_RECORDS_LOST
    assert "idemproxy store acknowledge-loss" in refused.detail
    assert sample(metrics, "idemproxy_store_records_lost", store_scope="pod") == 1
    assert [record.message for record in caplog.records] == [
        "the store lost records: effects are refused"
    ]

    assert await store.acknowledge_loss(verdict.loss.loss_id, "alice", "checked") is not None
    assert (await guard.check()).status is SafetyStatus.READY
    await guard.admit()
    assert sample(metrics, "idemproxy_store_records_lost", store_scope="pod") == 0


async def test_evictions_between_checks_are_a_loss_unless_allowed() -> None:
    for allowed, lost in ((False, True), (True, False)):
        store = TunableStore(dataclasses.replace(SAFE, eviction_policy="volatile-lru"))
        guard, _ = guard_of(store, allow_eviction=allowed)
        await guard.check()
        store.said = dataclasses.replace(store.said, evicted_keys=247)

        verdict = await guard.check()

        assert (verdict.loss is not None) is lost
        if verdict.loss is not None:
            assert verdict.loss.kind is LossKind.EVICTED
            assert "247 keys" in verdict.reason


async def test_counters_of_a_restarted_server_are_not_evictions() -> None:
    store = TunableStore(dataclasses.replace(SAFE, evicted_keys=500))
    guard, _ = guard_of(store)
    await guard.check()
    store.said = dataclasses.replace(SAFE, evicted_keys=600, server_id="run-2")
    assert (await guard.check()).loss is None


async def test_a_store_that_failed_under_a_request_is_checked_before_the_next() -> None:
    store = TunableStore()
    guard, _ = guard_of(store)
    await guard.admit()
    guard.suspect()  # a claim found the store down; it came back empty
    store.forget_marker()

    assert not guard.admits
    assert (await refusal(guard)).code is ProblemCode.STORE_RECORDS_LOST


async def test_a_store_still_failing_leaves_the_effect_to_its_claim() -> None:
    store = TunableStore()
    guard, _ = guard_of(store)
    await guard.admit()
    guard.suspect()
    store.failing = True
    await guard.admit()  # the claim, to whichever part of the store it goes, will tell
    assert not guard.admits  # and the next effect tries the check again
    store.failing = False
    await guard.admit()
    assert guard.admits


async def test_a_store_down_at_the_check_says_so_to_effects() -> None:
    store = TunableStore()
    store.failing = True
    guard, _ = guard_of(store)
    with pytest.raises(StoreUnavailable):
        await guard.admit()
    store.failing = False
    await guard.admit()


async def test_the_watch_checks_again_and_again_through_outages() -> None:
    store = TunableStore()
    store.failing = True
    guard, _ = guard_of(store)
    watching = asyncio.create_task(guard.watch(0.01))
    try:
        for _ in range(3):
            await store.asks.get()
        assert guard.verdict.status is SafetyStatus.UNCHECKED
        store.failing = False
        await store.asks.get()
        verdict = await guard.check()  # the watch's own check, if it is still running
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
    assert verdict.status is SafetyStatus.READY
