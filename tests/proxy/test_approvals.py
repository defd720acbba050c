"""Effects held for approval, through the in-process proxy on the memory store: held until an
operator approves that payload, sent once, held again for another payload, refused once denied
or expired (docs/approvals.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from idemproxy.store.approvals import ApprovalState, DecideRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import EventType
from tests.proxy.conftest import ProxyFactory
from tests.proxy.test_mcp import JSON, tools_call
from tests.support.upstream import EffectLog

AGENT = "default"
KEY = {"Idem-Batch": "b-1", "Idem-Tool-Call": "call-1"}
FORM = {**KEY, "Content-Type": "application/x-www-form-urlencoded"}
ABOVE = {"write": {"when": [{"field": "/amount", "above": 10000}], "approval_ttl_s": 60}}


class Clock:
    """The memory store's clock, moved by hand."""

    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


async def decide(store: MemoryStore, approval_id: str, approve: bool, note: str = "") -> None:
    audit = AuditEntry(AGENT, "approval.approve", "ops", approval_id)
    decided = await store.decide(
        DecideRequest(AGENT, approval_id, approve, audit, actor="ops", note=note)
    )
    assert decided is not None


async def held_id(response: Any) -> str:
    document = await response.json(content_type=None)
    approval_id: str = document["approval"]["id"]
    return approval_id


async def test_a_held_charge_is_sent_once_after_its_approval(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": ABOVE})
    held = await client.post("/up/messages", data=b"amount=25000&currency=usd", headers=FORM)
    assert held.status == 428
    assert held.headers["Idem-Outcome"] == "approval-required"
    assert held.headers["Retry-After"] == "30"
    # An SDK's own retry loop would spend its retries in seconds on what waits for a person.
    assert held.headers["Stripe-Should-Retry"] == "false"
    approval_id = await held_id(held)
    again = await client.post("/up/messages", data=b"currency=usd&amount=25000", headers=FORM)
    assert again.status == 428
    assert await held_id(again) == approval_id
    assert effects.count("/messages") == 0

    [waiting] = await store.list_approvals(AGENT)
    assert (waiting.approval_id, waiting.rule) == (approval_id, "/amount above 10000")
    assert '"amount": "25000"' in waiting.summary
    await decide(store, approval_id, approve=True)
    sent = await client.post("/up/messages", data=b"amount=25000&currency=usd", headers=FORM)
    assert sent.status == 200
    assert sent.headers["Idem-Outcome"] == "forwarded"
    replay = await client.post("/up/messages", data=b"amount=25000&currency=usd", headers=FORM)
    assert replay.headers["Idem-Outcome"] == "replayed"
    assert effects.count("/messages") == 1
    assert (await store.get_approval(AGENT, approval_id)).state is ApprovalState.USED  # type: ignore[union-attr]
    types = [event.type for event in await store.read_events(AGENT)]
    assert types.count(EventType.APPROVAL_REQUESTED) == 1
    assert types.index(EventType.APPROVED) < types.index(EventType.COMPLETED)


async def test_below_the_limit_nothing_waits(make_proxy: ProxyFactory, effects: EffectLog) -> None:
    client, _ = await make_proxy(**{"upstreams.up.approvals": ABOVE})
    sent = await client.post("/up/messages", data=b"amount=500&currency=usd", headers=FORM)
    assert sent.status == 200
    assert effects.count("/messages") == 1


async def test_another_payload_after_an_approval_is_held_again(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": ABOVE})
    first = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    await decide(store, await held_id(first), approve=True)
    changed = await client.post("/up/messages", data=b"amount=99000", headers=FORM)
    assert changed.status == 428
    assert await held_id(changed) != await held_id(first)
    assert effects.count("/messages") == 0
    # The approved one is still there for its own payload.
    sent = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    assert sent.status == 200
    assert effects.count("/messages") == 1


async def test_a_denied_request_is_never_sent_and_its_repeats_hear_the_note(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": ABOVE})
    held = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    await decide(store, await held_id(held), approve=False, note="not this customer")
    for _ in range(2):
        denied = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
        assert denied.status == 403
        document = await denied.json(content_type=None)
        assert document["note"] == "not this customer"
        assert "not this customer" in document["detail"]
        assert denied.headers["Stripe-Should-Retry"] == "false"
    assert effects.count("/messages") == 0


async def test_an_approval_unused_in_time_expires_and_is_asked_for_again(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    clock = Clock()
    store = MemoryStore(clock_ms=clock)
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": ABOVE})
    held = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    approval_id = await held_id(held)
    await decide(store, approval_id, approve=True)
    clock.now_ms += 61_000
    late = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    assert late.status == 428
    assert late.headers["Idem-Outcome"] == "approval-expired"
    assert await held_id(late) == approval_id
    assert effects.count("/messages") == 0
    approval = await store.get_approval(AGENT, approval_id)
    assert approval is not None
    assert (approval.state, approval.requests) == (ApprovalState.AWAITING, 2)
    types = [event.type for event in await store.read_events(AGENT)]
    assert types[-2:] == [EventType.APPROVAL_EXPIRED, EventType.APPROVAL_REQUESTED]


async def test_concurrent_repeats_after_the_approval_send_it_once(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": ABOVE})
    held = await client.post("/up/messages", data=b"amount=25000", headers=FORM)
    await decide(store, await held_id(held), approve=True)
    answers = await asyncio.gather(
        *(client.post("/up/messages", data=b"amount=25000", headers=FORM) for _ in range(8))
    )
    assert all(answer.status == 200 for answer in answers)
    assert effects.count("/messages") == 1


async def test_an_approval_spent_on_an_attempt_that_did_nothing_is_asked_for_again(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    rule: dict[str, object] = {"write": {}}  # every effect of the route
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": rule})
    held = await client.post("/up/status/429", data=b"{}", headers=KEY)
    approval_id = await held_id(held)
    await decide(store, approval_id, approve=True)
    limited = await client.post("/up/status/429", data=b"{}", headers=KEY)
    assert limited.status == 429  # sent, and not applied: the key is free again
    again = await client.post("/up/status/429", data=b"{}", headers=KEY)
    assert again.status == 428
    assert again.headers["Idem-Outcome"] == "approval-required"
    assert effects.count("/status/429") == 1


async def test_an_mcp_tool_named_by_the_rule_waits_and_others_do_not(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    rule = {"mcp": {"when": [{"tool": ["send_message"]}]}}
    client, _ = await make_proxy(store=store, policy="mcp", **{"upstreams.up.approvals": rule})
    held = await client.post("/up/mcp", data=tools_call(7, text="hi"), headers=JSON)
    assert held.status == 428
    answer = orjson.loads(await held.read())
    assert answer["id"] == 7
    assert answer["error"]["data"]["code"] == "approval-required"
    [waiting] = await store.list_approvals(AGENT)
    assert '"tool": "send_message"' in waiting.summary
    await decide(store, waiting.approval_id, approve=True)
    sent = await client.post("/up/mcp", data=tools_call(8, text="hi"), headers=JSON)
    assert sent.status == 200
    assert orjson.loads(await sent.read())["id"] == 8
    assert effects.count("/mcp") == 1


async def test_a_path_parameter_in_the_list_waits_and_others_do_not(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    rule = {"bot_api": {"when": [{"param": "method", "in": ["sendMessage"]}]}}
    client, _ = await make_proxy(store=store, **{"upstreams.up.approvals": rule})
    held = await client.post("/up/bot42:SECRET/sendMessage", data=b"{}", headers=KEY)
    assert held.status == 428
    [waiting] = await store.list_approvals(AGENT)
    assert waiting.rule == "{method} in ['sendMessage']"
    assert "SECRET" not in waiting.summary
    other = await client.post("/up/bot42:SECRET/messages", data=b"{}", headers=KEY)
    assert other.status == 200
    assert effects.count("/messages") == 1
    assert effects.count() == 1
