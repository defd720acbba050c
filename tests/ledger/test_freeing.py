"""Which records each recovery frees for the re-run, and freeing the recorded ones."""

from __future__ import annotations

import orjson

from idemproxy.effects.envelope import JsonRpcEnvelope
from idemproxy.ledger.compensated import mark_compensated
from idemproxy.ledger.freeing import Scope, free, last_external, to_free
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.service import LedgerService
from idemproxy.policies.route import Route
from idemproxy.proxy.relay import Relayed
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    EffectRecord,
    RecordKey,
    RecordState,
)
from tests.ledger.conftest import make_effect


async def batch(store: Store, ns: str) -> list[EffectRecord]:
    """a: 403, b: 200, c: 401, d: freed, e: 200 compensated; claimed in that order."""
    await make_effect(store, ns, "b1", "a", RecordState.COMPLETED, status=403)
    await make_effect(store, ns, "b1", "b", RecordState.COMPLETED)
    await make_effect(store, ns, "b1", "c", RecordState.COMPLETED, status=401)
    await make_effect(store, ns, "b1", "d", RecordState.NOT_APPLIED)
    undone = await make_effect(store, ns, "b1", "e", RecordState.COMPLETED)
    record = await store.get(undone)
    assert record is not None
    assert await mark_compensated(store, record, f"{ns}/tc:b1:compensate%3Ae:s-0", "ops")
    return await store.batch_records(ns, "b1")


def calls(records: list[EffectRecord]) -> list[str]:
    return sorted(record.meta.tool_call for record in records)


async def test_each_scope_frees_its_own_records(store: Store, ns: str) -> None:
    records = await batch(store, ns)
    assert calls(to_free(records, Scope.NOTHING_RECORDED)) == ["d"]
    assert calls(to_free(records, Scope.FAILURES)) == ["a", "c", "d"]
    assert calls(to_free(records, Scope.EVERYTHING)) == ["a", "c", "d", "e"]
    # The compensated e no longer stands: the last external effect is b.
    last = last_external(records)
    assert last is not None
    assert last.meta.tool_call == "b"
    assert calls(to_free(records, Scope.AFTER_LAST_EXTERNAL)) == ["c", "d"]


async def test_free_moves_failures_to_not_applied_at_a_new_fence(store: Store, ns: str) -> None:
    records = await batch(store, ns)
    failures = [r for r in records if r.meta.tool_call in ("a", "d")]
    cleared = await free(store, failures, "ops", "token rotated")
    fences = {item.effect_id.split(":")[2]: item.fence for item in cleared}
    before = {r.meta.tool_call: r.fence for r in failures}
    assert fences["a"] > before["a"]  # the fence the store gave it when freeing it
    assert fences["d"] == before["d"]  # already freed: cleared at the fence it was read at
    freed = await store.get(failures[0].key)
    assert freed is not None
    assert freed.state is RecordState.NOT_APPLIED
    assert (await store.read_audit(ns))[-1].action == "review.retry"


async def test_free_leaves_a_record_that_moved_on(store: Store, ns: str) -> None:
    records = await batch(store, ns)
    stale = next(r for r in records if r.meta.tool_call == "a")
    assert await free(store, [stale], "ops", "") != []
    assert await free(store, [stale], "ops", "") == []  # its fence moved on: left alone


async def test_a_restart_lets_the_failed_effect_be_claimed_again(store: Store, ns: str) -> None:
    key = await make_effect(store, ns, "b1", "a", RecordState.COMPLETED, status=401)
    plan = await LedgerService(store).recover(ns, "b1", RecoverMode.RESTART, "ops", "")
    assert plan["cleared"] == [str(key)]
    record = await store.get(key)
    assert record is None
    claim = await store.claim(ClaimRequest(key, "fp", EffectMeta("b1", "a"), 30_000, 600))
    assert isinstance(claim, Claimed)


async def test_a_restart_frees_an_mcp_tool_s_error_too(store: Store, ns: str) -> None:
    """An MCP tool's isError answer comes with 200: it counted toward the agent's pause, so a
    restart must free it as it frees a 401, or the re-run only replays the error."""
    key = RecordKey(ns, "tc:b1:a:d-0")
    meta = EffectMeta("b1", "a", "send_message", "tools", "POST", "/mcp#send_message")
    claim = await store.claim(ClaimRequest(key, "fp", meta, 30_000, 600))
    assert isinstance(claim, Claimed)
    failed = {"jsonrpc": "2.0", "id": 1, "result": {"isError": True, "content": []}}
    relayed = Relayed(orjson.dumps(failed), truncated=False, complete=True, client_gone=False)
    headers = (("Content-Type", "application/json"),)
    settlement, _ = JsonRpcEnvelope(1).settlement(
        RecordState.COMPLETED, 200, headers, relayed, Route(name="send_message")
    )
    assert await store.settle(key, claim.fence, settlement)
    plan = await LedgerService(store).recover(ns, "b1", RecoverMode.RESTART, "ops", "")
    assert plan["cleared"] == [str(key)]
