"""Stripe: an ``Idempotency-Key`` derived from the effect key replaces the SDK's random one.

Stripe replays the first answer to any request under a key it has seen in the last 24 hours,
and runs the request if it never got it, so inside that window a re-send is always safe.
"""

from __future__ import annotations

from idemproxy.policies.adapters.base import Adapter, Attempt, Outgoing, Plan, key_digest
from idemproxy.policies.kinds import AdapterName

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


def stripe_key(effect_key: str) -> str:
    return "idemproxy-" + key_digest(effect_key).hex()[:40]


class StripeAdapter(Adapter):
    name = AdapterName.STRIPE

    def outgoing(self, attempt: Attempt) -> Outgoing:
        key = stripe_key(attempt.effect_key)
        return Outgoing(attempt.body, {IDEMPOTENCY_KEY_HEADER: key}, native=True)

    def plan(self, path: str, age_ms: int) -> Plan:
        return Plan.RESEND if self.within_window(age_ms) else Plan.REVIEW
