"""The review queue and verdicts: compare-and-set on the record, audited, one winner."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.review import Decision
from idemproxy.ledger.service import LedgerService
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Standing,
)
from tests.ledger.conftest import make_effect


async def test_the_queue_lists_every_agents_unknown_outcomes_oldest_first(
    store: Store, ns: str
) -> None:
    first = await make_effect(store, f"{ns}-b", "b1", "c1", RecordState.UNKNOWN)
    await asyncio.sleep(0.005)
    second = await make_effect(store, f"{ns}-a", "b1", "c1", RecordState.UNKNOWN)
    await make_effect(store, f"{ns}-a", "b1", "c2", RecordState.COMPLETED)
    service = LedgerService(store)

    everyone = (await service.review(None, 100))["items"]
    mine = [item["effect_key"] for item in everyone if item["agent"].startswith(ns)]
    assert mine == [str(first), str(second)]
    only_a = (await service.review(f"{ns}-a", 100))["items"]
    assert [item["effect_key"] for item in only_a] == [str(second)]
    assert only_a[0]["reason"] == "no answer"
    assert only_a[0]["review"] == "/v1/review/" + quote(str(second), safe="")


async def test_applied_replays_the_given_response_and_is_audited(store: Store, ns: str) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    response = {"status": 201, "headers": {"content-type": "application/json"}, "body": '{"a":1}'}

    record = await LedgerService(store).resolve(
        str(key), Decision.APPLIED, "bob", "seen in #general", external_id="m-9", response=response
    )

    assert (record["state"], record["external_id"], record["status"]) == ("completed", "m-9", 201)
    assert "bob" in record["reason"]
    claim = await store.claim(ClaimRequest(key, "fp", EffectMeta(batch="b1"), 1000, 600))
    assert isinstance(claim, Standing)
    assert claim.record.response is not None
    assert claim.record.response.body == b'{"a":1}'
    [entry] = await store.read_audit(ns)
    assert (entry.action, entry.actor, entry.target) == ("review.resolve", "bob", str(key))
    assert (entry.before, entry.after, entry.note) == ("unknown", "completed", "seen in #general")
    assert await store.list_unknown(ns) == []


async def test_not_applied_frees_the_key(store: Store, ns: str) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    await LedgerService(store).resolve(
        str(key), Decision.parse("not-applied"), "bob", "not in the channel"
    )
    claim = await store.claim(ClaimRequest(key, "fp", EffectMeta(batch="b1"), 1000, 600))
    assert isinstance(claim, Claimed)


async def test_a_record_that_moved_on_answers_409_with_its_state(store: Store, ns: str) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    before = await store.get(key)
    with pytest.raises(RequestRefused) as raised:
        await LedgerService(store).resolve(str(key), Decision.NOT_APPLIED, "bob", "")
    assert raised.value.code is ProblemCode.STATE_CONFLICT
    assert raised.value.extra["state"] == "completed"
    assert raised.value.extra["record"]["effect_key"] == str(key)
    assert await store.get(key) == before
    assert await store.read_audit(ns) == []


async def test_concurrent_decisions_on_one_key_let_exactly_one_win(store: Store, ns: str) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    service = LedgerService(store)
    decisions = [Decision.APPLIED, Decision.NOT_APPLIED] * 5
    results = await asyncio.gather(
        *(service.resolve(str(key), v, f"op-{i}", "") for i, v in enumerate(decisions)),
        return_exceptions=True,
    )
    winners = [result for result in results if isinstance(result, dict)]
    losers = [result for result in results if isinstance(result, RequestRefused)]
    assert len(winners) == 1
    assert len(losers) == 9
    assert all(loser.code is ProblemCode.STATE_CONFLICT for loser in losers)
    assert all(loser.extra["state"] == winners[0]["state"] for loser in losers)
    [entry] = await store.read_audit(ns)
    assert entry.after == winners[0]["state"]


async def test_unknown_keys_and_bad_input_are_refused_clearly(store: Store, ns: str) -> None:
    service = LedgerService(store)
    with pytest.raises(RequestRefused) as raised:
        await service.resolve(f"{ns}/tc:nothing", Decision.APPLIED, "bob", "")
    assert raised.value.code is ProblemCode.NOT_FOUND
    with pytest.raises(RequestRefused, match="not an effect key"):
        await service.resolve("no-slash", Decision.APPLIED, "bob", "")
    key = await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    with pytest.raises(RequestRefused, match=r"'applied'.*'not_applied'"):
        await service.resolve(str(key), Decision.parse("maybe"), "bob", "")
    with pytest.raises(RequestRefused, match="response must look like"):
        await service.resolve(str(key), Decision.APPLIED, "bob", "", response={"status": "ok"})
    with pytest.raises(RequestRefused) as missing_agent:
        await service.review(f"{ns}-nobody", 10)
    assert missing_agent.value.code is ProblemCode.NOT_FOUND
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.UNKNOWN


async def test_an_agent_with_a_slash_in_its_id_still_resolves(store: Store, ns: str) -> None:
    key = await make_effect(store, f"{ns}/team/bot", "b1", "c1", RecordState.UNKNOWN)
    assert str(key) == f"{ns}/team/bot/tc:b1:c1:d-0"
    record = await LedgerService(store).resolve(str(key), Decision.APPLIED, "bob", "")
    assert record["agent"] == f"{ns}/team/bot"
    assert (await store.get(RecordKey(f"{ns}/team/bot", key.effect_id))) is not None
