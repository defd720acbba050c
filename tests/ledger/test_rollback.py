"""Rolling an agent back to a batch through a real proxy: every later batch is compensated,
newest first, the run stops at a batch that cannot be undone whole, and the target stays."""

from __future__ import annotations

from typing import Any

import pytest

from idemproxy.errors import ProblemCode, RequestRefused
from tests.ledger import test_compensation
from tests.ledger.test_compensation import AGENT, BOT_TOKEN, CREDENTIALS, STRIPE_KEY, Shop

shop = test_compensation.shop  # the proxy in front of Stripe, Discord and a notes upstream


async def act(shop: Shop, batch: str, tool_call: str, path: str, **kwargs: Any) -> int:
    headers = {"Idem-Agent": AGENT, "Idem-Batch": batch, "Idem-Tool-Call": tool_call}
    headers.update(kwargs.pop("headers", {}))
    async with shop.proxy.post(path, headers=headers, **kwargs) as answer:
        await answer.read()
        return answer.status


async def three_days(shop: Shop, last_logs: bool = False) -> None:
    charge = "amount=700&currency=eur&confirm=true&payment_method=pm_card_visa"
    form = {"Content-Type": "application/x-www-form-urlencoded", **STRIPE_KEY}
    assert await act(shop, "day-1", "charge", "/stripe/v1/payment_intents", data=charge,
                     headers=form) == 200  # fmt: skip
    for day in ("day-2", "day-3"):
        assert await act(shop, day, "notify", "/discord/v10/channels/81/messages",
                         json={"content": day}, headers=BOT_TOKEN) == 200  # fmt: skip
    if last_logs:
        assert await act(shop, "day-3", "log", "/notes/messages", json={"line": "x"}) == 200


async def test_the_later_batches_are_undone_newest_first_and_the_target_stays(
    shop: Shop,
) -> None:
    await three_days(shop)
    plan = await shop.service.rollback(AGENT, "day-1", "alice", "", None)
    assert [batch["batch"] for batch in plan["batches"]] == ["day-3", "day-2"]
    assert shop.discord.deleted == []

    done = await shop.service.rollback(AGENT, "day-1", "alice", "wrong channel", CREDENTIALS)

    assert done["undone"] == ["day-3", "day-2"]
    assert shop.discord.deleted == [m["id"] for m in reversed(shop.discord.messages)]
    assert shop.stripe.refunds == []
    day_2 = await shop.service.batch(AGENT, "day-2")
    assert [a["tool_call"] for a in day_2["compensated"]] == ["notify"]
    audit = (await shop.service.audit(AGENT, 10))["entries"]
    assert audit[-1]["action"] == "recover.rollback"


async def test_an_effect_no_compensation_undoes_is_named_and_left(shop: Shop) -> None:
    await three_days(shop, last_logs=True)

    plan = await shop.service.rollback(AGENT, "day-1", "alice", "", None)
    done = await shop.service.rollback(AGENT, "day-1", "alice", "", CREDENTIALS)

    assert [key.split(":")[2] for key in plan["cannot"]] == ["log"]
    assert "1 effect(s) cannot be undone" in plan["next_step"]
    assert done["undone"] == ["day-3", "day-2"]
    assert len(shop.discord.deleted) == 2
    assert "undo them by hand" in done["next_step"]


async def test_a_compensation_that_fails_stops_the_run_at_its_batch(shop: Shop) -> None:
    await three_days(shop)
    wrong = {**CREDENTIALS, "discord": {"Authorization": "Bearer not-a-bot"}}

    done = await shop.service.rollback(AGENT, "day-1", "alice", "", wrong)

    assert [batch["batch"] for batch in done["batches"]] == ["day-3"]
    assert (done["undone"], shop.discord.deleted) == ([], [])
    assert "stopped at batch day-3" in done["next_step"]


async def test_rolling_back_to_the_latest_or_an_unknown_batch_is_refused(shop: Shop) -> None:
    await three_days(shop)
    with pytest.raises(RequestRefused, match="no later batch") as latest:
        await shop.service.rollback(AGENT, "day-3", "alice", "", None)
    assert latest.value.code is ProblemCode.STATE_CONFLICT
    with pytest.raises(RequestRefused) as unknown:
        await shop.service.rollback(AGENT, "day-9", "alice", "", None)
    assert unknown.value.code is ProblemCode.NOT_FOUND
