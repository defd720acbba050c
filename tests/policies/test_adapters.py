"""Upstream adapters: native keys derived from the effect key, and what settles an unknown."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.fingerprint import fingerprint
from idemproxy.policies.adapters import adapter_for
from idemproxy.policies.adapters.base import Found, Settle
from idemproxy.policies.adapters.bluesky import BlueskyAdapter, derived_tid
from idemproxy.policies.adapters.discord import DiscordAdapter, discord_nonce
from idemproxy.policies.adapters.stripe import StripeAdapter, stripe_key
from idemproxy.policies.loader import load_policy
from idemproxy.policies.matcher import RouteMatcher

KEYS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80)
TID = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")
TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
JSON = "application/json"


def tid_time(tid: str) -> datetime:
    value = 0
    for char in tid:
        value = value * 32 + TID_ALPHABET.index(char)
    return datetime.fromtimestamp((value >> 10) / 1e6, UTC)


@given(KEYS, KEYS)
def test_native_keys_are_stable_per_effect_and_distinct_between_effects(a: str, b: str) -> None:
    for derive in (stripe_key, discord_nonce, derived_tid):
        assert derive(a) == derive(a)
        assert (derive(a) == derive(b)) == (a == b)


@given(KEYS)
def test_native_keys_fit_each_upstreams_rules(key: str) -> None:
    assert len(discord_nonce(key)) <= 25
    assert re.fullmatch(r"[a-z2-7]{25}", discord_nonce(key))
    assert stripe_key(key).startswith("idemproxy-")
    assert len(stripe_key(key)) <= 255
    tid = derived_tid(key)
    assert TID.match(tid)
    assert datetime(2023, 1, 1, tzinfo=UTC) <= tid_time(tid) < datetime(2025, 4, 1, tzinfo=UTC)


def test_stripe_replaces_the_sdks_random_key() -> None:
    sent = StripeAdapter(3600).outgoing(
        "agent/tc:1", b"amount=5", "application/x-www-form-urlencoded"
    )
    assert sent.native
    assert sent.body == b"amount=5"
    assert sent.headers == {"Idempotency-Key": stripe_key("agent/tc:1")}


def test_discord_sets_a_derived_enforced_nonce_on_json_sends_only() -> None:
    adapter = DiscordAdapter(120)
    sent = adapter.outgoing("agent/tc:1", b'{"content":"hi","nonce":"81237","tts":false}', JSON)
    assert sent.native
    assert orjson.loads(sent.body) == {
        "content": "hi",
        "nonce": discord_nonce("agent/tc:1"),
        "enforce_nonce": True,
        "tts": False,
    }
    multipart = adapter.outgoing("agent/tc:1", b"--x\r\n...", "multipart/form-data; boundary=x")
    assert not multipart.native
    assert multipart.body == b"--x\r\n..."


def test_bluesky_gives_a_create_a_derived_record_key_unless_it_has_one() -> None:
    adapter = BlueskyAdapter()
    record = {"repo": "did:plc:a", "collection": "app.bsky.feed.post", "record": {"text": "x"}}
    sent = adapter.outgoing("agent/tc:1", orjson.dumps(record), JSON)
    assert sent.native
    assert orjson.loads(sent.body) == {**record, "rkey": derived_tid("agent/tc:1")}
    own = adapter.outgoing("agent/tc:1", orjson.dumps({**record, "rkey": "self"}), JSON)
    assert orjson.loads(own.body)["rkey"] == "self"
    assert not adapter.outgoing("agent/tc:1", b'{"text":"x"}', JSON).native

    probe = adapter.read_back("/xrpc/com.atproto.repo.createRecord", sent)

    assert probe is not None
    assert probe.path_qs == (
        "/xrpc/com.atproto.repo.getRecord?repo=did%3Aplc%3Aa&collection=app.bsky.feed.post"
        f"&rkey={derived_tid('agent/tc:1')}"
    )


@pytest.mark.parametrize(
    ("status", "body", "found"),
    [
        (
            200,
            b'{"uri":"at://did:plc:a/app.bsky.feed.post/3k","cid":"bafy","value":{}}',
            Found.PRESENT,
        ),
        (400, b'{"error":"RecordNotFound","message":"Could not locate record"}', Found.ABSENT),
        (400, b'{"error":"InvalidRequest"}', Found.UNSURE),
        (502, b"bad gateway", Found.UNSURE),
    ],
)
def test_bluesky_reads_a_getrecord_answer(status: int, body: bytes, found: Found) -> None:
    verdict = BlueskyAdapter().verdict(status, body)
    assert verdict.found is found
    if found is Found.PRESENT:
        assert orjson.loads(verdict.body) == {
            "uri": "at://did:plc:a/app.bsky.feed.post/3k",
            "cid": "bafy",
        }
        assert verdict.external_id == "at://did:plc:a/app.bsky.feed.post/3k"


def test_bluesky_points_the_pds_endpoint_of_a_session_at_the_proxy() -> None:
    session = {
        "did": "did:plc:a",
        "didDoc": {
            "id": "did:plc:a",
            "service": [
                {"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
                 "serviceEndpoint": "https://morel.us-east.host.bsky.network"},
                {"id": "#bsky_fg", "type": "BskyFeedGenerator",
                 "serviceEndpoint": "https://feed.example"},
            ],
        },
    }  # fmt: skip
    adapter = BlueskyAdapter()
    assert adapter.rewrites_session("/xrpc/com.atproto.server.refreshSession")
    assert not adapter.rewrites_session("/xrpc/com.atproto.repo.createRecord")

    rewritten = orjson.loads(
        adapter.rewrite_session(orjson.dumps(session), "http://127.0.0.1:8080/bsky")
    )

    endpoints = [s["serviceEndpoint"] for s in rewritten["didDoc"]["service"]]
    assert endpoints == ["http://127.0.0.1:8080/bsky", "https://feed.example"]
    assert adapter.rewrite_session(b"not json", "http://x") == b"not json"


def test_how_each_adapter_settles_an_unknown_outcome() -> None:
    hour_ms = 3_600_000
    stripe = adapter_for(load_policy("stripe"))
    discord = adapter_for(load_policy("discord"))
    assert stripe.settle(hour_ms) is Settle.RESEND
    assert stripe.settle(23 * hour_ms + 1) is Settle.REVIEW
    assert discord.settle(119_000) is Settle.RESEND
    assert discord.settle(120_000) is Settle.REVIEW
    assert adapter_for(load_policy("bluesky")).settle(100 * hour_ms) is Settle.READ_BACK
    assert adapter_for(load_policy("slack")).settle(0) is Settle.REVIEW


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
