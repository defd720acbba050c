"""An upstream URL that ends inside its policy's route paths is found, and the fix named."""

from __future__ import annotations

import pytest

from idemproxy.policies.base_url import misplaced_base_url, misplaced_base_urls
from idemproxy.policies.loader import load_policy, parse_policy

# The URL each shipped pack is written for (docs/policies.md), and the one an SDK shows as the
# API's base URL, which holds the segments the pack's routes begin with.
PACK_URLS = [
    ("discord", "https://discord.com/api", "https://discord.com/api/v10", "/v10"),
    ("openai", "https://api.openai.com", "https://api.openai.com/v1", "/v1"),
    ("anthropic", "https://api.anthropic.com", "https://api.anthropic.com/v1", "/v1"),
    ("stripe", "https://api.stripe.com", "https://api.stripe.com/v1", "/v1"),
    ("slack", "https://slack.com", "https://slack.com/api", "/api"),
    ("bluesky", "https://bsky.social", "https://bsky.social/xrpc", "/xrpc"),
]


@pytest.mark.parametrize(("pack", "right", "wrong", "tail"), PACK_URLS)
def test_a_pack_behind_its_sdk_base_url_is_flagged_with_the_url_to_use(
    pack: str, right: str, wrong: str, tail: str
) -> None:
    problem = misplaced_base_url(pack, wrong, load_policy(pack))

    assert problem is not None
    assert problem.suggested_url == right
    assert problem.tail == tail
    message = problem.message()
    assert wrong in message
    assert f"the {pack} pack's routes" in message
    assert f"Use {right} as the upstream's URL" in message
    assert f"/{pack}{tail}" in message


@pytest.mark.parametrize(("pack", "right", "wrong", "tail"), PACK_URLS)
def test_a_pack_at_its_documented_url_is_not_flagged(
    pack: str, right: str, wrong: str, tail: str
) -> None:
    assert misplaced_base_url(pack, right, load_policy(pack)) is None


def test_discord_routes_beginning_with_the_version_placeholder_are_named_so() -> None:
    problem = misplaced_base_url("discord", "https://discord.com/api/v10", load_policy("discord"))

    assert problem is not None
    assert problem.routes_begin == "/{version}"
    assert "create_message" in problem.unreachable
    assert "read" not in problem.unreachable  # the catch-all still takes reads
    message = problem.message()
    assert "begin (/{version}/...)" in message
    # What a message create would lose, as the issue saw it.
    assert "'create_message'" in message
    assert "dedupe key" in message
    assert "compensation" in message


def test_openai_chat_completions_are_said_to_lose_their_generation_handling() -> None:
    problem = misplaced_base_url("openai", "https://api.openai.com/v1", load_policy("openai"))

    assert problem is not None
    assert {"chat_completions", "embeddings"} <= set(problem.unreachable)
    assert "generation handling" in problem.message()


def test_a_url_with_a_trailing_slash_is_read_like_one_without() -> None:
    problem = misplaced_base_url("discord", "https://discord.com/api/v10/", load_policy("discord"))

    assert problem is not None
    assert problem.suggested_url == "https://discord.com/api"


def test_a_placeholder_only_counts_for_a_segment_that_reads_like_a_version() -> None:
    policy = parse_policy(
        "name: tenants\n"
        "routes:\n"
        "  - {name: create_order, match: {methods: [POST], path: '/{tenant}/orders'}}\n"
        "default: {name: other}\n",
        "tenants.yaml",
    )

    assert misplaced_base_url("shop", "https://shop.example/api", policy) is None
    problem = misplaced_base_url("shop", "https://shop.example/api/v2", policy)
    assert problem is not None
    assert problem.suggested_url == "https://shop.example/api"
    assert "the tenants policy's routes" in problem.message()


def test_a_user_policy_whose_routes_repeat_the_url_path_is_flagged() -> None:
    policy = parse_policy(
        "name: billing\n"
        "routes:\n"
        "  - {name: create_invoice, match: {methods: [POST], path: /api/v2/invoices}}\n"
        "default: {name: other}\n",
        "billing.yaml",
    )

    problem = misplaced_base_url("billing", "https://billing.internal/api/v2", policy)

    assert problem is not None
    assert problem.tail == "/api/v2"
    assert problem.suggested_url == "https://billing.internal"
    assert problem.unreachable == ("create_invoice",)


def test_the_generic_pack_takes_any_url_but_one_ending_in_a_bot_token() -> None:
    generic = load_policy("generic")
    assert misplaced_base_url("up", "https://api.example/v1", generic) is None
    # A word that merely starts like the route's prefixed segment is not a token.
    assert misplaced_base_url("up", "https://api.example/bottles", generic) is None

    token = "bot110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
    problem = misplaced_base_url("telegram", f"https://api.telegram.org/{token}", generic)

    assert problem is not None
    assert problem.suggested_url == "https://api.telegram.org"
    assert problem.unreachable == ("bot_api",)
    # The token is a secret: the warning, which goes to logs, shows its placeholder.
    assert "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw" not in problem.message()
    assert "its URL https://api.telegram.org/bot{token} ends in /bot{token}" in problem.message()


def test_every_upstream_is_checked_and_only_the_misplaced_ones_reported() -> None:
    urls = {"discord": "https://discord.com/api", "openai": "https://api.openai.com/v1"}
    policies = {name: load_policy(name) for name in urls}

    problems = misplaced_base_urls(urls, policies)

    assert [problem.upstream for problem in problems] == ["openai"]
