"""The shipped packs classify the requests each service's SDK really sends."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from idemproxy.config.loader import load_config
from idemproxy.policies.kinds import AdapterName, EffectClass, ToolCallEffects
from idemproxy.policies.loader import load_policy
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.scope import Scope
from idemproxy.scopes import request_scope
from tests.test_credentials import ALICE, BOB, access_jwt, bot_token

SAFE, EXTERNAL, GENERATION = EffectClass.SAFE, EffectClass.EXTERNAL, EffectClass.GENERATION

CASES = [
    # pack, method, path below the upstream, route, effect, native key
    ("discord", "POST", "/v10/channels/81/messages", "create_message", EXTERNAL, True),
    ("discord", "PATCH", "/v10/channels/81/messages/9", "edit_message", EXTERNAL, False),
    ("discord", "DELETE", "/v10/channels/81/messages/9", "delete_message", EXTERNAL, False),
    ("discord", "PUT", "/v10/channels/81/messages/9/reactions/👍/@me", "add_reaction",
     EXTERNAL, False),
    ("discord", "DELETE", "/v10/channels/81/messages/9/reactions/👍/@me", "remove_own_reaction",
     EXTERNAL, False),
    ("discord", "DELETE", "/v10/channels/81/messages/9/reactions/👍/55", "remove_user_reaction",
     EXTERNAL, False),
    ("discord", "POST", "/v10/webhooks/1/tok", "execute_webhook", EXTERNAL, False),
    ("discord", "PATCH", "/v10/webhooks/1/tok", "webhook_with_token", EXTERNAL, False),
    ("discord", "DELETE", "/v10/webhooks/1/tok", "webhook_with_token", EXTERNAL, False),
    ("discord", "PATCH", "/v10/webhooks/1/tok/messages/@original", "edit_webhook_message",
     EXTERNAL, False),
    ("discord", "POST", "/v10/interactions/7/tok/callback", "interaction_callback", EXTERNAL,
     False),
    ("discord", "GET", "/v10/webhooks/1/tok", "read", SAFE, False),
    ("discord", "POST", "/v10/channels/81/typing", "trigger_typing", SAFE, False),
    ("discord", "GET", "/v10/users/@me", "read", SAFE, False),
    ("discord", "PATCH", "/v10/guilds/1", "other_write", EXTERNAL, False),
    ("bluesky", "POST", "/xrpc/com.atproto.server.createSession", "create_session", SAFE, False),
    ("bluesky", "POST", "/xrpc/com.atproto.repo.createRecord", "create_record", EXTERNAL, True),
    ("bluesky", "POST", "/xrpc/com.atproto.repo.applyWrites", "apply_writes", EXTERNAL, True),
    ("bluesky", "POST", "/xrpc/com.atproto.repo.putRecord", "put_record", EXTERNAL, True),
    ("bluesky", "POST", "/xrpc/com.atproto.repo.deleteRecord", "delete_record", EXTERNAL, True),
    ("bluesky", "POST", "/xrpc/com.atproto.repo.uploadBlob", "upload_blob", EXTERNAL, True),
    # A handle is unique on the PDS: it refuses a second account itself ("Handle already taken").
    ("bluesky", "POST", "/xrpc/com.atproto.server.createAccount", "create_account", SAFE, False),
    ("bluesky", "GET", "/xrpc/app.bsky.feed.getTimeline", "read", SAFE, False),
    ("bluesky", "POST", "/xrpc/app.bsky.actor.putPreferences", "other_procedure", EXTERNAL, False),
    ("stripe", "POST", "/v1/payment_intents", "create_payment_intent", EXTERNAL, True),
    ("stripe", "POST", "/v1/charges", "create_charge", EXTERNAL, True),
    ("stripe", "POST", "/v1/refunds", "write", EXTERNAL, True),
    ("stripe", "GET", "/v1/charges/ch_1", "read", SAFE, False),
    ("stripe", "DELETE", "/v1/customers/cus_1", "delete", EXTERNAL, False),
    ("slack", "POST", "/api/chat.postMessage", "chat_post_message", EXTERNAL, False),
    ("slack", "POST", "/api/conversations.history", "conversations_history", SAFE, False),
    ("slack", "POST", "/api/admin.users.invite", "other_method", EXTERNAL, False),
    ("openai", "POST", "/v1/chat/completions", "chat_completions", GENERATION, False),
    ("openai", "POST", "/v1/responses", "responses", GENERATION, False),
    ("openai", "POST", "/v1/embeddings", "embeddings", SAFE, False),
    ("openai", "GET", "/v1/models", "read", SAFE, False),
    ("openai", "POST", "/v1/files", "upload_file", EXTERNAL, False),
    ("anthropic", "POST", "/v1/messages", "messages", GENERATION, False),
    ("anthropic", "POST", "/v1/messages/count_tokens", "count_tokens", SAFE, False),
    ("anthropic", "POST", "/v1/messages/batches", "create_message_batch", EXTERNAL, False),
    ("anthropic", "GET", "/v1/models", "read", SAFE, False),
    ("generic", "PUT", "/anything/at/all", "write", EXTERNAL, False),
    ("generic", "POST", "/bot123:AAH-tok/sendMessage", "bot_api", EXTERNAL, False),
    ("generic", "GET", "/bot123:AAH-tok/getUpdates", "read", SAFE, False),
]  # fmt: skip


@pytest.mark.parametrize(("pack", "method", "path", "name", "effect", "native"), CASES)
def test_requests_land_on_the_route_the_service_needs(
    pack: str, method: str, path: str, name: str, effect: EffectClass, native: bool
) -> None:
    route = RouteMatcher(load_policy(pack)).match(method, path)
    assert (route.name, route.effect, route.native_key) == (name, effect, native)


def test_volatile_fields_cover_what_the_sdks_regenerate() -> None:
    discord = RouteMatcher(load_policy("discord")).match("POST", "/v10/channels/1/messages")
    bluesky = RouteMatcher(load_policy("bluesky"))
    # discord.py's random nonce, in the JSON body or in the payload_json part of a multipart send.
    assert discord.volatile_fields == ("/nonce", "/payload_json/nonce")
    for procedure in ("createRecord", "putRecord"):
        route = bluesky.match("POST", f"/xrpc/com.atproto.repo.{procedure}")
        assert route.volatile_fields == ("/record/createdAt",)
    apply_writes = bluesky.match("POST", "/xrpc/com.atproto.repo.applyWrites")
    assert apply_writes.volatile_fields == ("/writes/*/value/createdAt",)


def test_adapters_and_windows_of_the_packs() -> None:
    windows = {name: load_policy(name).window_s for name in ("stripe", "discord", "bluesky")}
    assert windows == {"stripe": 23 * 3600, "discord": 120, "bluesky": None}
    assert load_policy("slack").adapter is AdapterName.NONE


def test_generation_routes_let_untagged_calls_through() -> None:
    for pack, path in (("openai", "/v1/chat/completions"), ("anthropic", "/v1/messages")):
        route = RouteMatcher(load_policy(pack)).match("POST", path)
        assert route.on_missing_key == "passthrough"


def test_serve_picks_the_pack_named_like_the_upstream() -> None:
    loaded = load_config(
        environ={},
        flags={
            "upstreams.discord.url": "https://discord.com/api",
            "upstreams.openai.url": "https://api.openai.com",
            "upstreams.billing.url": "https://api.stripe.com",
            "upstreams.payments.url": "https://api.stripe.com",
            "upstreams.payments.policy": "stripe",
        },
    )
    names = {upstream: policy.name for upstream, policy in loaded.policies.items()}
    assert names == {
        "discord": "discord",
        "openai": "openai",
        "billing": "generic",
        "payments": "stripe",
    }


def pack_scope(pack: str, **headers: str) -> str:
    return request_scope(load_policy(pack).scope, CIMultiDict(headers))


def test_stripe_scopes_by_connected_account_and_mode_not_by_key() -> None:
    def on(account: str, key: str) -> str:
        return pack_scope("stripe", **{"Stripe-Account": account, "Authorization": f"Bearer {key}"})

    assert on("acct_A", "sk_test_one") == on("acct_A", "sk_test_rolled")
    assert on("acct_A", "sk_test_one") == on("acct_A", "rk_test_restricted")
    assert (
        len({on("acct_A", "sk_test_1"), on("acct_B", "sk_test_1"), on("acct_A", "sk_live_1")}) == 3
    )
    context = pack_scope(
        "stripe", **{"Stripe-Context": "ctx_A", "Authorization": "Bearer sk_test_1"}
    )
    assert context not in (on("acct_A", "sk_test_1"), pack_scope("stripe"))


def test_openai_scopes_by_organization_and_project_not_by_key() -> None:
    org = {"OpenAI-Organization": "org-A", "Authorization": "Bearer sk-proj-one"}
    assert pack_scope("openai", **org) == pack_scope("openai", **{**org, "Authorization": "x"})
    assert pack_scope("openai", **org) != pack_scope("openai", **{**org, "OpenAI-Project": "p"})
    assert pack_scope("openai", Authorization="Bearer sk-proj-one") == ""


def test_bluesky_scopes_by_the_did_a_token_names() -> None:
    alice, refreshed = access_jwt(ALICE), access_jwt(ALICE, issued_at=1_700_007_200)
    assert pack_scope("bluesky", Authorization=f"Bearer {alice}") == pack_scope(
        "bluesky", Authorization=f"Bearer {refreshed}"
    )
    assert pack_scope("bluesky", Authorization=f"Bearer {access_jwt(BOB)}") not in (
        pack_scope("bluesky", Authorization=f"Bearer {alice}"),
        "",
    )
    assert pack_scope("bluesky", Authorization="Bearer opaque") == ""


def test_discord_scopes_by_the_bot_a_token_names() -> None:
    bot = "1234567890123456789"
    assert pack_scope("discord", Authorization=bot_token(bot, "a")) == pack_scope(
        "discord", Authorization=bot_token(bot, "after-reset")
    )
    assert pack_scope("discord", Authorization=bot_token("42", "a")) != pack_scope(
        "discord", Authorization=bot_token(bot, "a")
    )


@pytest.mark.parametrize("pack", ["anthropic", "slack", "generic"])
def test_packs_whose_requests_name_no_account_do_not_scope(pack: str) -> None:
    # Their keys rotate and name no account: tenants are told apart by Idem-Agent.
    assert load_policy(pack).scope == Scope()
    assert pack_scope(pack, Authorization="Bearer xoxb-1-2-3", **{"X-Api-Key": "sk-ant-1"}) == ""


ONE_EFFECT_ROUTES = {
    "discord": {"create_message", "start_thread", "start_thread_from_message",
                "execute_webhook", "execute_webhook_compatible"},
    "stripe": {"create_payment_intent", "create_charge"},
    "bluesky": {"create_record", "apply_writes", "send_chat_message"},
    "slack": {"chat_post_message", "chat_post_ephemeral", "chat_schedule_message",
              "chat_me_message", "files_complete_upload"},
}  # fmt: skip


@pytest.mark.parametrize("pack", sorted(ONE_EFFECT_ROUTES))
def test_create_style_routes_make_one_effect_per_tool_call(pack: str) -> None:
    # A re-run the LLM words anew must not create twice; uploads, edits, deletes and generic
    # writes stay keyed by their request, since one tool call often makes several of them.
    policy = load_policy(pack)
    one = {
        route.name
        for route in (*policy.routes, policy.default)
        if route.tool_call_effects is ToolCallEffects.ONE
    }
    assert one == ONE_EFFECT_ROUTES[pack]
