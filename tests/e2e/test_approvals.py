"""Approve before it happens, end to end: stripe-python through `idemproxy serve` in front of the
Stripe fake. A charge over the limit is held, approved through the admin API and charged once;
a changed amount after the approval is held again; an approval left unused past its time is
refused; two proxies on one Redis, one restarted, still charge once (docs/approvals.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import stripe

from tests.support.fakes.serving import BackgroundServers
from tests.support.fakes.stripe import STRIPE, StripeService, build_stripe_app
from tests.support.processes import RedisServer, ServedProxy, running

TOKEN = "approvals-admin-token-0123456789"
AGENT = "billing-bot"


@pytest.fixture
def stripe_fake() -> Iterator[tuple[StripeService, str]]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_stripe_app()
        url = servers.serve(app)
        yield app[STRIPE], url
    finally:
        servers.stop()


def config(directory: Path, stripe_url: str, store: str, ttl_s: int = 900) -> Path:
    path = directory / "idemproxy.yaml"
    path.write_text(
        f"agent_id: {AGENT}\n"
        f"store: {store}\n"
        "upstreams:\n"
        "  stripe:\n"
        f"    url: {stripe_url}\n"
        "    approvals:\n"
        "      create_payment_intent:\n"
        "        when: [{field: /amount, above: 10000}]\n"
        f"        approval_ttl_s: {ttl_s}\n"
    )
    return path


def serve(directory: Path, stripe_url: str, store: str, ttl_s: int = 900) -> ServedProxy:
    path = config(directory, stripe_url, store, ttl_s)
    return ServedProxy(directory, "--config", str(path), env={"IDEMPROXY_ADMIN_TOKEN": TOKEN})


def charge(proxy: ServedProxy, amount: int, call: str = "call-1") -> stripe.PaymentIntent:
    """A charge as an agent's tool makes it: a fresh SDK client with its own retries."""
    client = stripe.StripeClient(
        "sk_test_approvals", base_addresses={"api": f"{proxy.url}/stripe"}, max_network_retries=2
    )
    params: Any = {"amount": amount, "currency": "usd", "confirm": True, "payment_method": "pm_1"}
    headers = {"Idem-Batch": "batch-1", "Idem-Tool-Call": call}
    return client.v1.payment_intents.create(params, {"headers": headers})


def held(proxy: ServedProxy, amount: int, call: str = "call-1") -> dict[str, Any]:
    """The refusal of a held charge, as the SDK surfaces it: an APIError carrying the problem."""
    with pytest.raises(stripe.APIError) as refused:
        charge(proxy, amount, call)
    assert refused.value.http_status in (403, 428)
    document = refused.value.json_body
    assert isinstance(document, dict)
    return document


def decide(proxy: ServedProxy, approval_id: str, verdict: str, note: str = "") -> httpx.Response:
    path = f"/v1/approvals/{quote(AGENT, safe='')}/{approval_id}/decision"
    return httpx.post(
        proxy.admin_url + path,
        json={"as": verdict, "note": note, "actor": "carol"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )


def waiting(proxy: ServedProxy) -> list[dict[str, Any]]:
    answer = httpx.get(
        proxy.admin_url + "/v1/approvals", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def test_a_charge_over_the_limit_is_held_approved_and_charged_once(
    tmp_path: Path, stripe_fake: tuple[StripeService, str]
) -> None:
    fake, url = stripe_fake
    proxy = serve(tmp_path, url, f"sqlite:///{tmp_path}/store.db")
    with running(proxy):
        small = charge(proxy, 500, call="small")
        assert small.status == "succeeded"  # below the limit nothing waits

        problem = held(proxy, 25_000)
        assert problem["type"].endswith("/approval-required")
        approval_id = problem["approval"]["id"]
        assert held(proxy, 25_000)["approval"]["id"] == approval_id  # the SDK's retries too
        assert len(fake.effects) == 1
        [item] = waiting(proxy)
        assert (item["approval_id"], item["rule"]) == (approval_id, "/amount above 10000")
        assert '"amount": "25000"' in item["summary"]
        assert "sk_test" not in item["summary"]

        assert decide(proxy, approval_id, "approved").status_code == 200
        # A re-run that changed the amount is another payment: held with an approval of its own.
        changed = held(proxy, 30_000)
        assert changed["type"].endswith("/approval-required")
        assert changed["approval"]["id"] != approval_id
        assert len(fake.effects) == 1

        paid = charge(proxy, 25_000)
        again = charge(proxy, 25_000)
        assert again.id == paid.id
        assert [intent["amount"] for intent in fake.effects] == [500, 25_000]
        # Once the tool call has charged, another amount under it is told so, not charged.
        with pytest.raises(stripe.APIError) as acted:
            charge(proxy, 30_000)
        assert acted.value.http_status == 409
        assert len(fake.effects) == 2


def test_a_denied_charge_is_never_sent_and_an_expired_approval_is_refused(
    tmp_path: Path, stripe_fake: tuple[StripeService, str]
) -> None:
    fake, url = stripe_fake
    proxy = serve(tmp_path, url, f"sqlite:///{tmp_path}/store.db", ttl_s=1)
    with running(proxy):
        denied_id = held(proxy, 50_000, call="deny-me")["approval"]["id"]
        assert decide(proxy, denied_id, "denied", "customer asked to stop").status_code == 200
        denied = held(proxy, 50_000, call="deny-me")
        assert denied["type"].endswith("/approval-denied")
        assert denied["note"] == "customer asked to stop"

        late_id = held(proxy, 60_000, call="too-late")["approval"]["id"]
        assert decide(proxy, late_id, "approved").status_code == 200
        time.sleep(1.5)
        expired = held(proxy, 60_000, call="too-late")
        assert expired["type"].endswith("/approval-expired")
        assert expired["approval"]["state"] == "awaiting_approval"
        assert decide(proxy, late_id, "approved").status_code == 200
        assert charge(proxy, 60_000, call="too-late").amount == 60_000
        assert [intent["amount"] for intent in fake.effects] == [60_000]


@pytest.mark.redis
def test_two_proxies_on_one_redis_and_a_restart_still_charge_once(
    tmp_path: Path, stripe_fake: tuple[StripeService, str]
) -> None:
    fake, url = stripe_fake
    redis = RedisServer(tmp_path)
    with running(redis):
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
        first, second = (serve(tmp_path / name, url, redis.url) for name in ("a", "b"))
        with running(first, second):
            approval_id = held(first, 25_000)["approval"]["id"]
            assert [item["approval_id"] for item in waiting(second)] == [approval_id]
            assert decide(second, approval_id, "approved").status_code == 200
            first.stop()
            first.start()
            results = [charge(proxy, 25_000).id for proxy in (first, second, first)]
            assert len(set(results)) == 1
            assert decide(first, approval_id, "approved").status_code == 409
        assert [intent["amount"] for intent in fake.effects] == [25_000]
