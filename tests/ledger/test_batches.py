"""An agent's batches with their state, newest first, and which are in error."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.batches import summary
from idemproxy.ledger.progress import BatchAction, batch_progress
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.service import LedgerService
from idemproxy.store.batches import BatchStart
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState
from tests.ledger.conftest import make_effect


def by_batch(listing: dict[str, object]) -> dict[str, dict[str, object]]:
    batches = listing["batches"]
    assert isinstance(batches, list)
    return {item["batch"]: item for item in batches}


async def test_each_batch_is_counted_and_judged(store: Store, ns: str) -> None:
    await make_effect(store, ns, "fine", "c1", RecordState.COMPLETED, external_id="m-1")
    await asyncio.sleep(0.005)
    await make_effect(store, ns, "doubt", "c1", RecordState.COMPLETED)
    await make_effect(store, ns, "doubt", "c2", RecordState.UNKNOWN)
    await asyncio.sleep(0.005)
    await make_effect(store, ns, "denied", "c1", RecordState.COMPLETED, status=401)
    await asyncio.sleep(0.005)
    await make_effect(store, ns, "died", "c1", None, lease_ms=1)
    await asyncio.sleep(0.005)
    await make_effect(store, ns, "sending", "c1", None)

    listing = await LedgerService(store).batches(ns, 100)

    assert listing["agent"] == ns
    assert [item["batch"] for item in listing["batches"]] == [
        "sending", "died", "denied", "doubt", "fine",
    ]  # fmt: skip
    items = by_batch(listing)
    assert {name: item["in_error"] for name, item in items.items()} == {
        "sending": False, "died": True, "denied": True, "doubt": True, "fine": False,
    }  # fmt: skip
    assert items["doubt"]["error"] == "1 unknown outcome(s)"
    assert items["doubt"]["strategy"] == "manual_only"
    assert (items["doubt"]["completed"], items["doubt"]["unknown"]) == (1, 1)
    assert items["denied"]["error"] == "1 failed"
    assert items["died"]["error"] == "1 lapsed in flight"
    assert (items["died"]["pending"], items["died"]["lapsed"]) == (1, 1)
    assert (items["sending"]["pending"], items["sending"]["lapsed"]) == (1, 0)
    assert items["fine"]["error"] == ""
    doubt = await store.batch_records(ns, "doubt")
    assert items["doubt"]["updated_ms"] == max(record.updated_ms for record in doubt)
    assert items["doubt"]["started_ms"] == min(record.created_ms for record in doubt)


async def test_the_limit_keeps_the_newest(store: Store, ns: str) -> None:
    for name in ("b1", "b2", "b3"):
        await make_effect(store, ns, name, "c1", RecordState.COMPLETED)
        await asyncio.sleep(0.005)
    listing = await LedgerService(store).batches(ns, 2)
    assert [item["batch"] for item in listing["batches"]] == ["b3", "b2"]


async def test_an_abandoned_batch_is_not_in_error(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    await make_effect(store, ns, "b1", "c2", RecordState.UNKNOWN)
    service = LedgerService(store)
    await service.recover(ns, "b1", RecoverMode.ABANDON, "alice", "gave up")
    [item] = (await service.batches(ns, 10))["batches"]
    assert item["abandoned"] is True
    assert item["strategy"] == "abandon"
    assert (item["in_error"], item["error"]) == (False, "")


async def test_an_agent_never_seen_is_not_found(store: Store, ns: str) -> None:
    with pytest.raises(RequestRefused) as refused:
        await LedgerService(store).batches(f"{ns}-nobody", 10)
    assert refused.value.code is ProblemCode.NOT_FOUND


def test_an_effect_undone_by_its_compensation_counts_for_the_batch_s_last_change() -> None:
    undone = BatchAction(
        effect_key="a/e1",
        tool_call="c1",
        action="post_message",
        upstream="discord",
        method="POST",
        path="/channels/1/messages",
        state=RecordState.COMPLETED,
        status=409,
        updated_ms=5000,
        compensated_by="a/compensate:e1",
    )
    progress = dataclasses.replace(batch_progress("a", "b", [], None), compensated=(undone,))

    found = summary(BatchStart("b", started_ms=1000), progress, now_ms=6000)

    assert found.updated_ms == 5000
    assert not found.in_error  # undone on purpose: nothing waits for anyone
