"""The approval desk: what waits, across agents; a decision is compare-and-set and audited."""

from __future__ import annotations

import asyncio

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger import documents
from idemproxy.ledger.approvals import Verdict
from idemproxy.ledger.service import LedgerService
from idemproxy.metrics import Metrics
from idemproxy.store.approvals import Approval, HoldRequest
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectMeta, RecordKey


async def hold(store: Store, agent: str, effect_id: str, fingerprint: str = "f") -> Approval:
    meta = EffectMeta(batch="b", tool_call=effect_id, upstream="stripe", method="POST")
    request = HoldRequest(
        RecordKey(agent, effect_id), fingerprint, meta, "/amount above 10000", "{}", 60_000, 900_000
    )
    return await store.hold(request)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [("approved", Verdict.APPROVED), ("approve", Verdict.APPROVED), ("deny", Verdict.DENIED)],
)
def test_a_verdict_is_read_in_either_tense(text: str, verdict: Verdict) -> None:
    assert Verdict.parse(text) is verdict


def test_anything_else_is_no_verdict() -> None:
    with pytest.raises(RequestRefused, match="'approved' \\(send it, once\\) or 'denied'"):
        Verdict.parse("maybe")


async def test_the_desk_lists_what_waits_across_agents_oldest_first(store: Store, ns: str) -> None:
    first = await hold(store, f"{ns}-b", "c1")
    await asyncio.sleep(0.005)
    second = await hold(store, f"{ns}-a", "c1")
    service = LedgerService(store)
    everyone = (await service.approvals(None, 100))["items"]
    mine = [item["approval_id"] for item in everyone if item["agent"].startswith(ns)]
    assert mine == [first.approval_id, second.approval_id]
    [only_a] = (await service.approvals(f"{ns}-a", 100))["items"]
    assert only_a["state"] == "awaiting_approval"
    assert only_a["rule"] == "/amount above 10000"
    assert only_a["valid_s"] == 900
    assert only_a["link"] == f"/v1/approvals/{ns}-a/{second.approval_id}"


async def test_a_decision_is_audited_and_counted_and_a_second_one_refused(
    store: Store, ns: str
) -> None:
    held = await hold(store, ns, "c1")
    metrics = Metrics()
    service = LedgerService(store, metrics=metrics)
    document = await service.decide(ns, held.approval_id, Verdict.APPROVED, "ops", "ok")
    assert (document["state"], document["actor"], document["note"]) == ("approved", "ops", "ok")
    assert document["valid_until_ms"] == document["decided_ms"] + 900_000
    [entry] = (await service.audit(ns, 10))["entries"]
    assert (entry["action"], entry["target"], entry["after"]) == (
        "approval.approve",
        held.approval_id,
        "approved",
    )
    sample = {"upstream": "stripe", "event": "approved"}
    assert metrics.registry.get_sample_value("idemproxy_approvals_total", sample) == 1
    with pytest.raises(RequestRefused) as refused:
        await service.decide(ns, held.approval_id, Verdict.DENIED, "other", "")
    assert refused.value.code is ProblemCode.STATE_CONFLICT
    assert refused.value.extra == {"state": "approved"}


async def test_an_unknown_approval_is_not_found(store: Store, ns: str) -> None:
    with pytest.raises(RequestRefused) as refused:
        await LedgerService(store).approval(ns, "ap_nothing")
    assert refused.value.code is ProblemCode.NOT_FOUND


async def test_the_controller_gets_each_change_with_the_approval_named(
    store: Store, ns: str
) -> None:
    held = await hold(store, ns, "c1")
    await LedgerService(store).decide(ns, held.approval_id, Verdict.DENIED, "ops", "not now")
    requested, denied = [documents.event(e) for e in await store.read_events(ns)]
    assert (requested["type"], denied["type"]) == ("effect.approval_requested", "effect.denied")
    assert denied["effect_key"] == f"{ns}/c1"
    assert (denied["state"], denied["reason"]) == ("denied", "not now")
    assert denied["approval_id"] == held.approval_id
    assert denied["actor"] == "ops"
    assert requested["rule"] == "/amount above 10000"
