"""Compensating a half-done batch through a real proxy, in front of Stripe and Discord fakes:
each completed effect is undone once, newest first, however often the run is repeated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.admin.sender import ProxySender
from idemproxy.config.loader import load_config
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.compensator import Compensator
from idemproxy.ledger.service import LedgerService
from idemproxy.metrics import Metrics
from idemproxy.proxy.app import build_proxy_app
from idemproxy.server import build_state
from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyTestServer
from tests.support.fakes.discord import DISCORD, DiscordService, build_discord_app
from tests.support.fakes.stripe import STRIPE, StripeService, build_stripe_app
from tests.support.upstream import build_upstream_app

AGENT, BATCH = "shop-bot", "order-7"
STRIPE_KEY = {"Authorization": "Bearer sk_test_1"}
BOT_TOKEN = {"Authorization": "Bot token-1"}
CREDENTIALS = {"stripe": STRIPE_KEY, "discord": BOT_TOKEN}
BROKEN_POLICY = """
name: notes
routes: []
default:
  name: write
  compensation: {method: DELETE, path: "/messages/{response./receipt}"}
"""


@dataclass
class Shop:
    proxy: TestClient[web.Request, web.Application]
    service: LedgerService
    stripe: StripeService
    discord: DiscordService

    async def act(self, tool_call: str, path: str, **kwargs: Any) -> int:
        headers = {"Idem-Agent": AGENT, "Idem-Batch": BATCH, "Idem-Tool-Call": tool_call}
        headers.update(kwargs.pop("headers", {}))
        async with self.proxy.post(path, headers=headers, **kwargs) as answer:
            await answer.read()
            return answer.status

    async def half_done_batch(self) -> None:
        """Charge, notify, log; the batch stops before its fourth call."""
        charge = "amount=700&currency=eur&confirm=true&payment_method=pm_card_visa"
        content = {"Content-Type": "application/x-www-form-urlencoded", **STRIPE_KEY}
        assert await self.act("charge", "/stripe/v1/payment_intents", data=charge,
                              headers=content) == 200  # fmt: skip
        notify = {"content": "order 7 is paid"}
        assert await self.act("notify", "/discord/v10/channels/81/messages", json=notify,
                              headers=BOT_TOKEN) == 200  # fmt: skip
        assert await self.act("log", "/notes/messages", json={"line": "order 7"}) == 200


@pytest.fixture
async def shop(aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path) -> AsyncIterator[Shop]:
    stripe = await aiohttp_server(build_stripe_app())
    discord = await aiohttp_server(build_discord_app())
    notes = await aiohttp_server(build_upstream_app())
    broken = tmp_path / "notes.yaml"
    broken.write_text(BROKEN_POLICY)
    flags = {
        "upstreams.stripe.url": str(stripe.make_url("")),
        "upstreams.discord.url": str(discord.make_url("/api")),
        "upstreams.notes.url": str(notes.make_url("")),
        "upstreams.notes.policy": "generic",
        "upstreams.broken.url": str(notes.make_url("")),
        "upstreams.broken.policy": str(broken),
    }
    loaded = load_config(environ={}, flags=flags)
    store = MemoryStore()
    state = build_state(loaded, store, Metrics())
    proxy: TestClient[web.Request, web.Application] = await aiohttp_client(
        ProxyTestServer(build_proxy_app(state))
    )
    sender = ProxySender(str(proxy.server.make_url("")).rstrip("/"), state.seal)
    policies = {name: upstream.policy for name, upstream in state.upstreams.items()}
    service = LedgerService(store, compensator=Compensator(policies, sender))
    yield Shop(proxy, service, stripe.app[STRIPE], discord.app[DISCORD])
    await sender.close()


async def test_the_plan_lists_what_will_be_undone_newest_first_and_sends_nothing(
    shop: Shop,
) -> None:
    await shop.half_done_batch()

    plan = await shop.service.compensation(AGENT, BATCH)

    message = shop.discord.messages[0]["id"]
    assert plan["confirmed"] is False
    assert [(u["tool_call"], u["state"], u["request"]) for u in plan["undo"]] == [
        ("notify", "planned", f"DELETE /v10/channels/81/messages/{message}"),
        ("charge", "planned", "POST /v1/refunds"),
    ]
    assert [(u["tool_call"], u["state"]) for u in plan["cannot"]] == [("log", "cannot")]
    assert "declares no compensation" in plan["cannot"][0]["detail"]
    assert "--yes to send 2 compensation(s)" in plan["next_step"]
    assert (shop.stripe.refunds, shop.discord.deleted) == ([], [])


async def test_compensating_twice_refunds_and_deletes_exactly_once_even_while_paused(
    shop: Shop,
) -> None:
    await shop.half_done_batch()
    await shop.service.pause(AGENT, "alice", "order 7 was a mistake")

    first = await shop.service.compensate(AGENT, BATCH, "alice", "undo order 7", CREDENTIALS)
    second = await shop.service.compensate(AGENT, BATCH, "alice", "again", CREDENTIALS)

    assert [(u["tool_call"], u["state"], u["status"]) for u in first["undo"]] == [
        ("notify", "undone", 204),
        ("charge", "undone", 200),
    ]
    assert [u["state"] for u in second["undo"]] == ["undone", "undone"]
    assert second["next_step"].startswith("nothing left to undo")
    assert [refund["payment_intent"] for refund in shop.stripe.refunds] == list(shop.stripe.intents)
    assert shop.discord.deleted == [shop.discord.messages[0]["id"]]
    progress = await shop.service.batch(AGENT, BATCH)
    assert sorted(a["tool_call"] for a in progress["completed"]) == [
        "compensate:charge", "compensate:notify", "log",
    ]  # fmt: skip
    assert sorted(a["tool_call"] for a in progress["compensated"]) == ["charge", "notify"]
    audit = (await shop.service.audit(AGENT, 10))["entries"]
    assert [(e["action"], e["after"]) for e in audit if e["action"] == "recover.compensate"] == [
        ("recover.compensate", "2 undone"),
        ("recover.compensate", "0 undone"),
    ]


async def test_a_failure_stops_the_run_and_a_retry_after_the_fix_finishes_it(shop: Shop) -> None:
    await shop.half_done_batch()

    stopped = await shop.service.compensate(AGENT, BATCH, "alice", "", {"stripe": STRIPE_KEY})

    assert [(u["tool_call"], u["state"], u["status"]) for u in stopped["undo"]] == [
        ("notify", "failed", 401),
        ("charge", "planned", 0),
    ]
    assert "1 compensation(s) not sent" in stopped["next_step"]
    assert shop.stripe.refunds == []
    failed_key = stopped["undo"][0]["compensation_key"]
    assert f"idemproxy review retry {failed_key}" in stopped["next_step"]

    await shop.service.retry(failed_key, "alice", "bot token given")
    done = await shop.service.compensate(AGENT, BATCH, "alice", "", CREDENTIALS)

    assert [u["state"] for u in done["undo"]] == ["undone", "undone"]
    assert (len(shop.stripe.refunds), len(shop.discord.deleted)) == (1, 1)


async def test_a_template_the_response_does_not_fit_blocks_the_run_before_anything_is_sent(
    shop: Shop,
) -> None:
    await shop.half_done_batch()
    assert await shop.act("note", "/broken/messages", json={"line": "x"}) == 200

    plan = await shop.service.compensation(AGENT, BATCH)
    [invalid] = [u for u in plan["cannot"] if u["state"] == "invalid"]
    assert "{response./receipt}: the response has no value at /receipt" in invalid["detail"]
    with pytest.raises(RequestRefused) as refused:
        await shop.service.compensate(AGENT, BATCH, "alice", "", CREDENTIALS)

    assert refused.value.code is ProblemCode.STATE_CONFLICT
    assert refused.value.detail.startswith("nothing was sent: route 'write'")
    assert (shop.stripe.refunds, shop.discord.deleted) == ([], [])
    entries = (await shop.service.audit(AGENT, 10))["entries"]
    assert "recover.compensate" not in [entry["action"] for entry in entries]


async def test_a_batch_with_nothing_completed_has_nothing_to_compensate(shop: Shop) -> None:
    headers = {"Content-Type": "application/x-www-form-urlencoded", **STRIPE_KEY}
    unconfirmed = "amount=700&currency=eur"
    assert await shop.act("charge", "/notes/status/402", data=unconfirmed, headers=headers) == 402

    with pytest.raises(RequestRefused) as planned:
        await shop.service.compensation(AGENT, BATCH)
    with pytest.raises(RequestRefused) as ran:
        await shop.service.compensate(AGENT, BATCH, "alice", "", CREDENTIALS)

    for refused in (planned, ran):
        assert refused.value.code is ProblemCode.STATE_CONFLICT
        assert "has no completed effect, so there is nothing to compensate" in refused.value.detail
    assert (await shop.service.audit(AGENT, 10))["entries"] == []


async def test_on_a_store_alone_compensation_points_to_the_admin_api() -> None:
    with pytest.raises(RequestRefused) as refused:
        await LedgerService(MemoryStore()).compensation(AGENT, BATCH)
    assert refused.value.code is ProblemCode.INVALID_REQUEST
    assert "use --admin-url" in refused.value.detail
