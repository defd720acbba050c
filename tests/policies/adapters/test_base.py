"""Upstream adapters: native keys derived from the effect key, and the plan for an unknown."""

from __future__ import annotations

import re

import orjson
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.fingerprint import fingerprint
from idemproxy.policies.adapters import adapter_for
from idemproxy.policies.adapters.base import Attempt, Plan
from idemproxy.policies.adapters.discord import discord_nonce
from idemproxy.policies.adapters.stripe import stripe_key
from idemproxy.policies.loader import load_policy
from idemproxy.policies.matcher import RouteMatcher

KEYS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80)
JSON = "application/json"


def attempt(
    body: bytes, content_type: str = JSON, path: str = "/v10/channels/1/messages"
) -> Attempt:
    return Attempt(path, "agent/tc:1", body, content_type, first_attempt_ms=1_796_000_000_000)


@given(KEYS, KEYS)
def test_native_keys_are_stable_per_effect_and_distinct_between_effects(a: str, b: str) -> None:
    for derive in (stripe_key, discord_nonce):
        assert derive(a) == derive(a)
        assert (derive(a) == derive(b)) == (a == b)


@given(KEYS)
def test_native_keys_fit_each_upstreams_rules(key: str) -> None:
    assert len(discord_nonce(key)) <= 25
    assert re.fullmatch(r"[a-z2-7]{25}", discord_nonce(key))
    assert stripe_key(key).startswith("idemproxy-")
    assert len(stripe_key(key)) <= 255


def test_how_each_adapter_plans_to_reconcile_an_unknown_outcome() -> None:
    hour_ms = 3_600_000
    stripe = adapter_for(load_policy("stripe"))
    discord = adapter_for(load_policy("discord"))
    bluesky = adapter_for(load_policy("bluesky"))
    assert stripe.plan("/v1/charges", hour_ms) is Plan.RESEND
    assert stripe.plan("/v1/charges", 23 * hour_ms + 1) is Plan.REVIEW
    assert discord.plan("/v10/channels/1/messages", 119_000) is Plan.RESEND
    assert discord.plan("/v10/channels/1/messages", 120_000) is Plan.REVIEW
    create = "/xrpc/com.atproto.repo.createRecord"
    assert bluesky.plan(create, 100 * hour_ms) is Plan.READ_BACK
    assert bluesky.plan("/xrpc/com.atproto.repo.uploadBlob", 100 * hour_ms) is Plan.RESEND
    assert adapter_for(load_policy("slack")).plan("/api/chat.postMessage", 0) is Plan.REVIEW


DISCORD_CREATE = RouteMatcher(load_policy("discord")).match("POST", "/v10/channels/1/messages")


@given(st.integers(0, 2**64), st.integers(0, 2**64), st.text(max_size=40))
def test_a_volatile_field_never_changes_the_digest_but_content_does(
    nonce_a: int, nonce_b: int, content: str
) -> None:
    route = DISCORD_CREATE

    def digest(body: dict[str, object]) -> str:
        return fingerprint(
            "POST", "discord", "/v10/channels/1/messages", "", orjson.dumps(body), JSON,
            route.volatile_fields,
        )  # fmt: skip

    assert digest({"content": content, "nonce": str(nonce_a)}) == digest(
        {"nonce": str(nonce_b), "content": content}
    )
    assert digest({"content": content, "nonce": "1"}) != digest(
        {"content": content + "!", "nonce": "1"}
    )
