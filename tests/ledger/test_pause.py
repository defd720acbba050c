"""Pause, resume ("mark fixed") and retry: compare-and-set on the agent and on each record,
audited, on every store backend."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.instrumented import InstrumentedStore
from idemproxy.ledger.review import Decision
from idemproxy.ledger.service import LedgerService
from idemproxy.ledger.sweeper import Sweeper
from idemproxy.metrics import Metrics
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    Paused,
    RecordKey,
    RecordState,
    ResolveRequest,
    ResolveResult,
    Settlement,
    StoredResponse,
)

POD = {"store_scope": "pod"}  # the labels of a gauge read from a pod's own store

LIMIT = 5
DENIED = StoredResponse(401, (("content-type", "application/json"),), b'{"error":"revoked"}')


async def settle(store: Store, key: RecordKey, settlement: Settlement, limit: int = LIMIT) -> int:
    """One attempt at ``key``, settled and counted toward a pause; its fence."""
    claim = await store.claim(ClaimRequest(key, "fp", EffectMeta(batch="b1"), 30_000, 600))
    assert isinstance(claim, Claimed), claim
    counted = Settlement(
        settlement.state, settlement.response, reason=settlement.reason, pause_after_failures=limit
    )
    assert await store.settle(key, claim.fence, counted)
    return claim.fence


def denied() -> Settlement:
    return Settlement(RecordState.COMPLETED, DENIED)


def ok() -> Settlement:
    return Settlement(RecordState.COMPLETED, StoredResponse(200, (), b"{}"))


async def auto_paused(store: Store, agent: str, lost: tuple[int, ...] = ()) -> list[RecordKey]:
    """Five failures that pause the agent; those numbered in ``lost`` end unknown, not denied."""
    keys = [RecordKey(agent, f"e{index}") for index in range(LIMIT)]
    for index, key in enumerate(keys):
        unknown = Settlement(RecordState.UNKNOWN, reason="no answer within read timeout")
        await settle(store, key, unknown if index in lost else denied())
    assert (await store.read_control(agent)).auto_paused
    return keys


async def states(store: Store, keys: list[RecordKey]) -> list[str]:
    return [record.state.value if (record := await store.get(key)) else "" for key in keys]


async def test_resume_frees_only_what_is_still_failed_then_runs(store: Store, ns: str) -> None:
    keys = await auto_paused(store, ns, lost=(3, 4))
    service = LedgerService(store)
    # Meanwhile an operator freed e1 by hand, and found that e3 did happen after all.
    await service.retry(str(keys[1]), "carol", "token rotated")
    await service.resolve(str(keys[3]), Decision.APPLIED, "carol", "it is in the channel")

    preview = (await service.agent(ns))["snapshot"]
    expected = ["freed", "already_free", "freed", "moved_on", "unknown"]
    assert [item["result"] for item in preview] == expected

    resumed = await service.resume(ns, "alice", "token rotated")

    assert [item["result"] for item in resumed["freed"]] == expected
    assert await states(store, keys) == ["not_applied", "not_applied", "not_applied", "completed",
                                         "unknown"]  # fmt: skip
    status = await service.agent(ns)
    assert (status["state"], status["failures"], status["snapshot"]) == ("running", 0, [])
    # The re-run of a freed effect is sent: its claim takes the key.
    assert isinstance(
        await store.claim(ClaimRequest(keys[0], "fp", EffectMeta(), 1000, 600)), Claimed
    )
    actions = [(e.action, e.target) for e in await store.read_audit(ns)]
    assert actions == [
        ("agent.auto_pause", ns),
        ("review.retry", str(keys[1])),
        ("review.resolve", str(keys[3])),
        ("review.retry", str(keys[0])),
        ("review.retry", str(keys[2])),
        ("agent.resume", ns),
    ]
    resume_entry = (await store.read_audit(ns))[-1]
    assert resume_entry.actor == "alice"
    assert resume_entry.before.startswith("paused (auto) by idemproxy: auto-paused after 5")
    assert resume_entry.after == (
        "running; snapshot: 2 freed, 1 already_free, 1 moved_on, 1 unknown, 0 gone"
    )


class Interleaving(InstrumentedStore):
    """The store, with something else happening as a resume frees its first record."""

    def __init__(self, store: Store, meanwhile: Callable[[Store, str], Awaitable[None]]) -> None:
        super().__init__(store, Metrics())
        self._meanwhile: Callable[[Store, str], Awaitable[None]] | None = meanwhile

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            await meanwhile(self.inner, request.key.agent)
        return await super().resolve(request)


async def bob_pauses(store: Store, agent: str) -> None:
    await LedgerService(store).pause(agent, "bob", "hands off: refunds pending")


async def a_late_attempt_fails(store: Store, agent: str) -> None:
    """An attempt that was in flight when the agent paused fails now."""
    late = RecordKey(agent, "late")
    claim = await store.claim(
        ClaimRequest(late, "fp", EffectMeta(), 30_000, 600, ignore_pause=True)
    )
    assert isinstance(claim, Claimed)
    failed = Settlement(RecordState.COMPLETED, DENIED, pause_after_failures=LIMIT)
    assert await store.settle(late, claim.fence, failed)


async def test_a_manual_pause_during_resume_wins(store: Store, ns: str) -> None:
    keys = await auto_paused(store, ns)
    racing = Interleaving(store, bob_pauses)

    with pytest.raises(RequestRefused) as refused:
        await LedgerService(racing).resume(ns, "alice", "fixed")

    assert refused.value.code is ProblemCode.STATE_CONFLICT
    assert "paused (operator) by bob" in refused.value.detail
    assert "that pause stands" in refused.value.detail
    control = await store.read_control(ns)
    assert control.pause is not None
    assert (control.pause.actor, control.pause.reason) == ("bob", "hands off: refunds pending")
    assert len(control.snapshot) == LIMIT  # kept for the resume that follows bob's pause
    assert await states(store, keys) == ["not_applied"] * LIMIT
    assert "agent.resume" not in [entry.action for entry in await store.read_audit(ns)]

    # Bob resumes later: nothing left to free, and the agent runs.
    resumed = await LedgerService(store).resume(ns, "bob", "refunds done")
    assert {item["result"] for item in resumed["freed"]} == {"already_free"}
    assert (await store.read_control(ns)).pause is None


async def test_a_failure_joining_the_snapshot_during_resume_is_freed_too(
    store: Store, ns: str
) -> None:
    keys = await auto_paused(store, ns)

    resumed = await LedgerService(Interleaving(store, a_late_attempt_fails)).resume(ns, "a", "")

    assert [item["effect_key"] for item in resumed["freed"]][-1] == f"{ns}/late"
    assert await states(store, [*keys, RecordKey(ns, "late")]) == ["not_applied"] * (LIMIT + 1)
    assert (await store.read_control(ns)).pause is None


async def test_resuming_an_agent_that_is_not_paused_changes_nothing(store: Store, ns: str) -> None:
    await settle(store, RecordKey(ns, "e0"), denied())
    before = (await store.read_control(ns), await store.read_audit(ns))

    with pytest.raises(RequestRefused) as refused:
        await LedgerService(store).resume(ns, "alice", "")

    assert refused.value.code is ProblemCode.STATE_CONFLICT
    assert f"agent {ns!r} is not paused, so there is nothing to resume" in refused.value.detail
    assert (await store.read_control(ns), await store.read_audit(ns)) == before


async def test_resume_is_idempotent(store: Store, ns: str) -> None:
    keys = await auto_paused(store, ns)
    service = LedgerService(store)
    await service.resume(ns, "alice", "")
    audit = await store.read_audit(ns)

    with pytest.raises(RequestRefused, match="not paused"):
        await service.resume(ns, "alice", "again")

    assert await store.read_audit(ns) == audit
    assert await states(store, keys) == ["not_applied"] * LIMIT


async def test_an_operator_pause_holds_the_agent_and_is_not_set_twice(
    store: Store, ns: str
) -> None:
    await settle(store, RecordKey(ns, "e0"), ok())
    service = LedgerService(store)

    status = await service.pause(ns, "alice", "investigating")

    assert (status["state"], status["paused_by"], status["reason"]) == (
        "paused",
        "operator",
        "investigating",
    )
    claim = await store.claim(ClaimRequest(RecordKey(ns, "e1"), "fp", EffectMeta(), 1000, 600))
    assert isinstance(claim, Paused)
    with pytest.raises(RequestRefused, match="already paused"):
        await service.pause(ns, "bob", "")
    resumed = await service.resume(ns, "alice", "")
    assert resumed["freed"] == []


async def test_retry_frees_one_failed_effect_and_refuses_anything_else(
    store: Store, ns: str
) -> None:
    failed, lost, done = RecordKey(ns, "failed"), RecordKey(ns, "lost"), RecordKey(ns, "done")
    await settle(store, failed, denied())
    await settle(store, lost, Settlement(RecordState.UNKNOWN, reason="no answer"))
    await settle(store, done, ok())
    service = LedgerService(store)

    record = await service.retry(str(failed), "alice", "permission granted")

    assert record["state"] == "not_applied"
    assert "freed by alice" in record["reason"]
    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.target, entry.before) == (
        "review.retry",
        str(failed),
        "failed (401)",
    )
    for key, words in [
        (lost, "review resolve"),
        (done, "completed with status 200"),
        (failed, "already free"),
    ]:
        with pytest.raises(RequestRefused) as refused:
            await service.retry(str(key), "alice", "")
        assert refused.value.code is ProblemCode.STATE_CONFLICT
        assert words in refused.value.detail
    with pytest.raises(RequestRefused) as missing:
        await service.retry(f"{ns}/nope", "alice", "")
    assert missing.value.code is ProblemCode.NOT_FOUND
    assert len(await store.read_audit(ns)) == 1


async def test_an_unknown_agent_is_not_found(store: Store, ns: str) -> None:
    with pytest.raises(RequestRefused) as refused:
        await LedgerService(store).agent(f"{ns}-nobody")
    assert refused.value.code is ProblemCode.NOT_FOUND


async def test_the_sweep_counts_paused_agents_for_the_gauge() -> None:
    store = MemoryStore()
    await auto_paused(store, "bot-1")
    await settle(store, RecordKey("bot-2", "e0"), ok())
    metrics = Metrics()

    await Sweeper(store, metrics, interval_s=5).sweep_once()

    assert metrics.registry.get_sample_value("idemproxy_agents_paused", POD) == 1
    await LedgerService(store).resume("bot-1", "alice", "")
    await Sweeper(store, metrics, interval_s=5).sweep_once()
    assert metrics.registry.get_sample_value("idemproxy_agents_paused", POD) == 0


async def test_the_sweep_says_which_agents_are_paused_until_they_are_resumed() -> None:
    store = MemoryStore()
    await auto_paused(store, "bot-1")
    await settle(store, RecordKey("bot-2", "e0"), ok())
    metrics = Metrics()
    sweeper = Sweeper(store, metrics, interval_s=5)

    def paused(agent: str) -> float | None:
        labels = {"agent": agent, **POD}
        return metrics.registry.get_sample_value("idemproxy_agent_paused", labels)

    await sweeper.sweep_once()
    assert paused("bot-1") == 1
    assert paused("bot-2") is None  # never paused: no series of its own
    await LedgerService(store).resume("bot-1", "alice", "")
    await sweeper.sweep_once()
    assert paused("bot-1") == 0
