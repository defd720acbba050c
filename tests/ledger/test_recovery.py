"""Batch progress, the strategy it calls for, and the recoveries an operator can run."""

from __future__ import annotations

import asyncio

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.service import LedgerService
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState
from tests.ledger.conftest import make_effect

OPS = "alice@laptop"


def tool_calls(actions: list[dict[str, object]]) -> list[object]:
    return [action["tool_call"] for action in actions]


async def test_progress_sorts_effects_the_way_the_seed_reads_them(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    await make_effect(store, ns, "b1", "c2", RecordState.COMPLETED, status=403)
    await make_effect(store, ns, "b1", "c3", RecordState.NOT_APPLIED)
    await make_effect(store, ns, "b1", "c4", None)
    await make_effect(store, ns, "b1", "c5", RecordState.UNKNOWN)
    await make_effect(store, ns, "b2", "other", RecordState.COMPLETED)

    progress = await LedgerService(store).batch(ns, "b1")

    assert tool_calls(progress["completed"]) == ["c1"]
    assert progress["completed"][0]["external_id"] == "m-1"
    assert {a["tool_call"]: a["retryable"] for a in progress["failed"]} == {"c2": False, "c3": True}
    assert tool_calls(progress["pending"]) == ["c4"]
    assert tool_calls(progress["unknown"]) == ["c5"]
    assert progress["strategy"] == "manual_only"
    assert progress["replay"] == ["c1"]


@pytest.mark.parametrize(
    ("states", "strategy"),
    [
        ([RecordState.NOT_APPLIED], "restart_batch"),
        ([RecordState.COMPLETED, RecordState.NOT_APPLIED], "selective"),
        ([RecordState.COMPLETED, RecordState.UNKNOWN], "manual_only"),
    ],
)
async def test_the_strategy_follows_spec_6(
    store: Store, ns: str, states: list[RecordState], strategy: str
) -> None:
    for i, state in enumerate(states):
        await make_effect(store, ns, "b1", f"c{i}", state)
    assert (await LedgerService(store).batch(ns, "b1"))["strategy"] == strategy


async def test_unknown_agents_and_batches_are_not_found(store: Store, ns: str) -> None:
    service = LedgerService(store)
    with pytest.raises(RequestRefused, match="agent") as raised:
        await service.batch(f"{ns}-nobody", "b1")
    assert raised.value.code is ProblemCode.NOT_FOUND
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    with pytest.raises(RequestRefused, match="batch 'b9'"):
        await service.batch(ns, "b9")


async def test_auto_recovery_clears_freed_records_and_plans_a_selective_rerun(
    store: Store, ns: str
) -> None:
    done = await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    freed = await make_effect(store, ns, "b1", "c2", RecordState.NOT_APPLIED)

    plan = await LedgerService(store).recover(ns, "b1", RecoverMode.AUTO, OPS, "retry after outage")

    assert plan["strategy"] == "selective"
    assert plan["replay"] == ["c1"]
    assert plan["cleared"] == [str(freed)]
    assert not plan["archived"]
    assert await store.get(freed) is None
    assert await store.get(done) is not None
    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.actor, entry.target) == ("recover.restart", OPS, "b1")
    assert entry.before.startswith("selective: 1 completed, 1 failed")
    assert entry.note == "retry after outage"


async def test_auto_recovery_is_audited_and_logged_as_the_strategy_it_picked(
    store: Store, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, status=401)
    await make_effect(store, ns, "b1", "c2", RecordState.NOT_APPLIED)
    caplog.set_level("INFO", "idemproxy.ledger.recovery")

    plan = await LedgerService(store).recover(ns, "b1", RecoverMode.AUTO, OPS, "")

    assert plan["strategy"] == "restart_batch"
    # The 401 is freed first (audited as a retry of it), then both are cleared.
    entries = await store.read_audit(ns)
    assert sorted(entry.action for entry in entries) == ["recover.restart", "review.retry"]
    [entry] = [entry for entry in entries if entry.action == "recover.restart"]
    assert entry.after.startswith("auto picked restart_batch: 2 freed record(s) cleared")
    [logged] = [r for r in caplog.records if r.name == "idemproxy.ledger.recovery"]
    assert "restart_batch" in logged.getMessage()
    assert "auto" not in logged.getMessage().replace("auto picked", "")


async def test_a_batch_with_unknown_outcomes_is_not_rerun(store: Store, ns: str) -> None:
    doubt = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    freed = await make_effect(store, ns, "b1", "c2", RecordState.NOT_APPLIED)
    for mode in (RecoverMode.AUTO, RecoverMode.RESTART):
        with pytest.raises(RequestRefused, match="review resolve") as raised:
            await LedgerService(store).recover(ns, "b1", mode, OPS, "")
        assert raised.value.code is ProblemCode.STATE_CONFLICT
        assert raised.value.extra["review"] == [str(doubt)]
    assert await store.get(freed) is not None
    assert await store.read_audit(ns) == []


async def test_no_recovery_while_an_effect_is_being_sent(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", None)
    for mode in RecoverMode:
        with pytest.raises(RequestRefused, match="c1 are being sent"):
            await LedgerService(store).recover(ns, "b1", mode, OPS, "")


async def test_abandon_archives_then_clears_only_what_never_happened(store: Store, ns: str) -> None:
    done = await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    doubt = await make_effect(store, ns, "b1", "c2", RecordState.UNKNOWN)
    freed = await make_effect(store, ns, "b1", "c3", RecordState.NOT_APPLIED)
    service = LedgerService(store)

    plan = await service.recover(ns, "b1", RecoverMode.ABANDON, OPS, "customer cancelled")

    assert (plan["strategy"], plan["archived"]) == ("abandon", True)
    assert plan["cleared"] == [str(freed)]
    assert plan["review"] == [str(doubt)]
    done_record = await store.get(done)
    assert done_record is not None
    assert done_record.state is RecordState.COMPLETED
    assert [r.key for r in await store.list_unknown(ns)] == [doubt]
    progress = await service.batch(ns, "b1")
    assert progress["strategy"] == "abandon"
    assert progress["abandoned"]["actor"] == OPS
    assert progress["abandoned"]["note"] == "customer cancelled"
    archive = await store.read_archive(ns, "b1")
    assert archive is not None
    assert b'"c3"' in archive  # the freed record is in the archive, though gone from the store


async def test_abandoning_is_final(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.NOT_APPLIED)
    service = LedgerService(store)
    await service.recover(ns, "b1", RecoverMode.ABANDON, OPS, "")
    archive = await store.read_archive(ns, "b1")
    progress = await service.batch(ns, "b1")  # its only record is gone; the archive stays
    assert (progress["strategy"], progress["failed"]) == ("abandon", [])
    for mode in RecoverMode:
        with pytest.raises(RequestRefused, match="abandoned by alice@laptop"):
            await service.recover(ns, "b1", mode, OPS, "")
    assert await store.read_archive(ns, "b1") == archive
    assert [entry.action for entry in await store.read_audit(ns)] == ["recover.abandon"]


async def test_recovery_actions_are_rate_limited_per_agent(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    await make_effect(store, f"{ns}-other", "b1", "c1", RecordState.COMPLETED)
    service = LedgerService(store, actions_per_minute=2)
    for _ in range(2):
        await service.recover(ns, "b1", RecoverMode.AUTO, OPS, "")
    with pytest.raises(RequestRefused) as raised:
        await service.recover(ns, "b1", RecoverMode.AUTO, OPS, "")
    assert raised.value.code is ProblemCode.RATE_LIMITED
    assert raised.value.retry_after_s is not None
    assert 1 <= raised.value.retry_after_s <= 60
    await service.recover(f"{ns}-other", "b1", RecoverMode.AUTO, OPS, "")


async def test_an_unknown_strategy_is_refused(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    with pytest.raises(
        RequestRefused, match="auto, restart, restart-from-last-external or abandon"
    ):
        await LedgerService(store).recover(ns, "b1", RecoverMode.parse("compensate"), OPS, "")


async def test_a_batch_still_answers_from_its_archive_once_its_records_expired(
    store: Store, ns: str
) -> None:
    """Records live their route's ttl_s; what the batch did must outlive them."""
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, external_id="m-1", ttl_s=1)
    await make_effect(store, ns, "b1", "c2", RecordState.COMPLETED, status=403, ttl_s=1)
    await asyncio.sleep(1.2)
    assert await store.batch_records(ns, "b1") == []

    progress = await LedgerService(store).batch(ns, "b1")

    assert tool_calls(progress["completed"]) == ["c1"]
    assert progress["completed"][0]["external_id"] == "m-1"
    assert progress["completed"][0]["archived"] is True
    assert tool_calls(progress["failed"]) == ["c2"]
    assert progress["replay"] == []  # a re-run would send them again: nothing is replayed
    assert progress["expired"] == ["c1"]
