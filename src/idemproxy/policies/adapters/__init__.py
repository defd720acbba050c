"""Upstream adapters (SPEC section 5): one small module per upstream's dedupe mechanism."""

from __future__ import annotations

from idemproxy.policies.adapters.base import Adapter
from idemproxy.policies.adapters.bluesky import BlueskyAdapter
from idemproxy.policies.adapters.discord import DiscordAdapter
from idemproxy.policies.adapters.stripe import StripeAdapter
from idemproxy.policies.kinds import AdapterName
from idemproxy.policies.policy import Policy

_ADAPTERS: dict[AdapterName, type[Adapter]] = {
    AdapterName.NONE: Adapter,
    AdapterName.STRIPE: StripeAdapter,
    AdapterName.DISCORD: DiscordAdapter,
    AdapterName.BLUESKY: BlueskyAdapter,
}


def adapter_for(policy: Policy) -> Adapter:
    """The adapter a policy names, set to the policy's native dedupe window."""
    return _ADAPTERS[policy.adapter](policy.window_s)
