"""The Stripe adapter: the SDK's random Idempotency-Key replaced by one derived from the effect."""

from __future__ import annotations

from idemproxy.policies.adapters.stripe import StripeAdapter, stripe_key
from tests.policies.adapters.test_base import attempt


def test_stripe_replaces_the_sdks_random_key() -> None:
    sent = StripeAdapter(3600).outgoing(
        attempt(b"amount=5", "application/x-www-form-urlencoded", "/v1/charges")
    )
    assert sent.native
    assert sent.body == b"amount=5"
    assert sent.headers == {"Idempotency-Key": stripe_key("agent/tc:1")}
