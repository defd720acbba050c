"""Compensation end to end with the CLI: a half-done order is refunded and its announcement
deleted through ``idemproxy serve``, exactly once each however often the operator runs it."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.e2e.test_recovery import cli
from tests.e2e.test_workers import worker_pids
from tests.support.fakes.discord import DISCORD, DiscordService, build_discord_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.fakes.stripe import STRIPE, StripeService, build_stripe_app
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT, BATCH = "shop-bot", "order-9"
STRIPE_KEY = "Bearer sk_test_e2e"
BOT_TOKEN = "Bot e2e-token"


@pytest.fixture
def fakes() -> Iterator[tuple[StripeService, DiscordService, dict[str, str]]]:
    servers = BackgroundServers()
    servers.start()
    try:
        stripe, discord = build_stripe_app(), build_discord_app()
        urls = {"stripe": servers.serve(stripe), "discord": servers.serve(discord) + "/api"}
        yield stripe[STRIPE], discord[DISCORD], urls
    finally:
        servers.stop()


def act(proxy: ServedProxy, call: str, path: str, body: bytes, headers: dict[str, str]) -> int:
    sent = {"Idem-Batch": BATCH, "Idem-Tool-Call": call, **headers}
    request = urllib.request.Request(f"{proxy.url}{path}", body, sent, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def send(proxy: ServedProxy, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    """POST as the agent; the status and ``Idem-Outcome``."""
    request = urllib.request.Request(f"{proxy.url}{path}", body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.headers.get("Idem-Outcome", "")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Idem-Outcome", "")


def test_a_half_done_order_is_refunded_and_unannounced_once_however_often_it_is_run(
    tmp_path: Path, fakes: tuple[StripeService, DiscordService, dict[str, str]]
) -> None:
    stripe, discord, urls = fakes
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"stripe={urls['stripe']}",
        "--upstream", f"discord={urls['discord']}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
    )  # fmt: skip
    form = {"Content-Type": "application/x-www-form-urlencoded", "Authorization": STRIPE_KEY}
    with running(proxy):
        charge = b"amount=4200&currency=eur&confirm=true&payment_method=pm_card_visa"
        assert act(proxy, "charge", "/stripe/v1/payment_intents", charge, form) == 200
        announce = orjson.dumps({"content": "order 9 is on its way"})
        json = {"Content-Type": "application/json", "Authorization": BOT_TOKEN}
        assert act(proxy, "announce", "/discord/v10/channels/7/messages", announce, json) == 200
        # The third tool call (shipping) never ran: the order is abandoned half done.

        admin = ("--admin-url", proxy.admin_url)
        code, plan = cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin)
        assert code == 0, plan
        assert stripe.refunds == []
        assert discord.deleted == []

        sent = ("--yes", "--header", f"stripe=Authorization: {STRIPE_KEY}",
                "--header", f"discord=Authorization: {BOT_TOKEN}")  # fmt: skip
        runs = [cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin, *sent,
                    "--json") for _ in range(2)]  # fmt: skip

        code, bad = cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin,
                        "--yes", "--header", "stripe")  # fmt: skip
        assert (code, "is not UPSTREAM=NAME:VALUE" in bad) == (2, True)
        code, alone = cli("recover", AGENT, BATCH, "--strategy", "compensate",
                          "--store", f"sqlite:///{tmp_path}/effects.db")  # fmt: skip
        assert (code, "use --admin-url" in alone) == (1, True)

    message = discord.messages[0]["id"]
    lines = plan.splitlines()
    assert lines[0] == f"plan to compensate batch {BATCH} of agent {AGENT}, newest first"
    rows = [line.split()[:4] for line in lines if line.startswith(f"{AGENT}/tc:{BATCH}:")]
    assert [row[1:] for row in rows] == [
        ["create_message", "planned", "DELETE"],
        ["create_payment_intent", "planned", "POST"],
    ]
    assert [row[0].split(":")[2] for row in rows] == ["announce", "charge"]
    assert f"/v10/channels/7/messages/{message}" in plan
    assert "next: run again with --yes to send 2 compensation(s), newest first" in plan

    assert [code for code, _ in runs] == [0, 0]
    first, second = (orjson.loads(out) for _, out in runs)
    assert [(u["tool_call"], u["state"]) for u in first["undo"]] == [
        ("announce", "undone"),
        ("charge", "undone"),
    ]
    assert [u["state"] for u in second["undo"]] == ["undone", "undone"]
    assert [refund["payment_intent"] for refund in stripe.refunds] == list(stripe.intents)
    assert discord.deleted == [message]
    assert stripe.seen_on("/v1/refunds")[0].headers["Authorization"] == STRIPE_KEY


def test_while_paused_the_agent_cannot_pass_as_a_compensation_and_the_operator_can(
    tmp_path: Path, fakes: tuple[StripeService, DiscordService, dict[str, str]]
) -> None:
    """Two workers share one listener: a compensation the admin API of one sends may reach the
    other's proxy listener, and it still passes, while the agent's copy of one never does."""
    stripe, _, urls = fakes
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"stripe={urls['stripe']}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
        "--workers", "2",
    )  # fmt: skip
    form = {"Content-Type": "application/x-www-form-urlencoded", "Authorization": STRIPE_KEY}
    charge = b"amount=4200&currency=eur&confirm=true&payment_method=pm_card_visa"
    batches = ["order-a", "order-b", "order-c"]
    with running(proxy):
        worker_pids(proxy)
        for batch in batches:
            tagged = {**form, "Idem-Batch": batch, "Idem-Tool-Call": "charge"}
            assert send(proxy, "/stripe/v1/payment_intents", charge, tagged) == (200, "forwarded")
        admin = ("--admin-url", proxy.admin_url)
        code, paused = cli("agent", "pause", AGENT, *admin, "--note", "refunding the orders")
        assert code == 0, paused

        # The agent sends what the proxy's compensation sender would, made-up seal and all.
        refund = f"payment_intent={next(iter(stripe.intents))}".encode()
        forged = {
            **form,
            "Idem-Batch": batches[0],
            "Idem-Tool-Call": "compensate:charge",
            "Idem-Compensates": f"{AGENT}/tc:{batches[0]}:charge:d-0",
            "Idem-Compensation-Seal": "0" * 64,
        }
        assert send(proxy, "/stripe/v1/refunds", refund, forged) == (403, "forged-compensation")
        assert stripe.refunds == []
        unkeyed = {**form, "Idem-Batch": batches[0], "Idem-Tool-Call": "refund-it"}
        assert send(proxy, "/stripe/v1/refunds", refund, unkeyed) == (503, "agent-paused")

        sent = ("--yes", "--header", f"stripe=Authorization: {STRIPE_KEY}", "--json")
        runs = [cli("recover", AGENT, batch, "--strategy", "compensate", *admin, *sent)
                for batch in batches]  # fmt: skip

    for code, out in runs:
        assert code == 0, out
        assert [u["state"] for u in orjson.loads(out)["undo"]] == ["undone"]
    assert sorted(r["payment_intent"] for r in stripe.refunds) == sorted(stripe.intents)
