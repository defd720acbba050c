"""The approval gate's edges: an operator's own effect, a store that fails under it, and an
approval another attempt spent first (the in-process flows are in tests/proxy/test_approvals.py)."""

from __future__ import annotations

from idemproxy.effects.approval import NOT_FORWARDED
from idemproxy.store.approvals import Approval, DecideRequest
from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

ALWAYS: dict[str, object] = {"upstreams.up.approvals": {"write": {}}}
KEY = {"Idem-Batch": "b", "Idem-Tool-Call": "c", "Content-Type": "application/json"}


class TakenElsewhere(MemoryStore):
    """A store on which another attempt always spends the approval first."""

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        return None


class ApprovalsDown(MemoryStore):
    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        raise StoreUnavailable("down")


async def test_a_store_that_fails_under_the_gate_sends_nothing(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(store=ApprovalsDown(), **ALWAYS)
    answer = await client.post("/up/messages", data=b"{}", headers=KEY)
    assert answer.status == 503
    assert effects.count() == 0


async def test_a_claim_whose_approval_is_gone_is_released_unsent_and_refused(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = TakenElsewhere()
    client, _ = await make_proxy(store=store, **ALWAYS)
    held = await client.post("/up/messages", data=b"{}", headers=KEY)
    approval_id = (await held.json(content_type=None))["approval"]["id"]
    [record_key] = {event.key for event in await store.read_events("default")}
    audit = AuditEntry("default", "approval.approve", "ops", approval_id)
    await store.decide(DecideRequest("default", approval_id, True, audit))
    answer = await client.post("/up/messages", data=b"{}", headers=KEY)
    assert answer.status == 428
    record = await store.get(RecordKey(record_key.agent, record_key.effect_id))
    assert record is not None
    assert (record.state, record.reason) == (RecordState.NOT_APPLIED, NOT_FORWARDED)
    assert effects.count() == 0
