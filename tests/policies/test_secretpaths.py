"""Secret path parameters: the path a record keeps and shows has each of them as ``{name}``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.policies.loader import load_policy, parse_policy, shipped_packs
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.route import Route
from idemproxy.policies.secretpaths import REDACTED_PATH, shown_path
from idemproxy.policies.templates import param_names

TOKEN = "123456789:AAHsecretTelegramToken_0123456789abc"


def route(path: str, *secret: str) -> Route:
    return Route.model_validate(
        {"name": "r", "match": {"path": path}, "secret_path_params": list(secret)}
    )


def test_a_secret_parameter_is_shown_as_its_placeholder() -> None:
    bot = route("/bot{token}/{method}", "token")
    assert shown_path(bot, f"/bot{TOKEN}/sendMessage") == "/bot{token}/sendMessage"
    hook = route("/{version}/webhooks/{webhook_id}/{token}", "token")
    assert shown_path(hook, "/v10/webhooks/123/tok-en") == "/v10/webhooks/123/{token}"
    assert shown_path(hook, "/v10/webhooks/123/tok-en/") == "/v10/webhooks/123/{token}/"


def test_several_secrets_and_a_secret_rest_are_each_replaced() -> None:
    both = route("/a/{one}/b/{two}/{rest*}", "one", "rest")
    assert shown_path(both, "/a/x/b/y/z/w") == "/a/{one}/b/y/{rest}"
    # A rest parameter that matched nothing has nothing to hide.
    assert shown_path(both, "/a/x/b/y") == "/a/{one}/b/y"


def test_a_route_without_secrets_shows_the_path_as_it_came() -> None:
    assert shown_path(route("/bot{token}/{method}"), f"/bot{TOKEN}/x") == f"/bot{TOKEN}/x"


def test_a_path_its_route_template_does_not_fit_is_hidden_whole() -> None:
    # Only a policy's default route takes paths its template does not fit (its match is unused).
    policy = parse_policy(
        "name: x\ndefault:\n  name: w\n  match: {path: '/hooks/{token}'}\n"
        "  secret_path_params: [token]\n",
        "x.yaml",
    )
    taken = RouteMatcher(policy).match("POST", f"/other/{TOKEN}")
    assert taken is policy.default
    assert shown_path(taken, f"/other/{TOKEN}") == REDACTED_PATH


SECRET_TEXT = st.text(st.characters(blacklist_characters="/", min_codepoint=0x21), min_size=1)


@given(SECRET_TEXT, SECRET_TEXT)
def test_no_secret_survives_in_the_shown_path(token: str, method: str) -> None:
    bot = route("/bot{token}/{method}", "token")
    shown = shown_path(bot, f"/bot{token}/{method}")
    assert shown == f"/bot{{token}}/{method}"


# Every shipped route whose path carries a credential, and the parameter that holds it.
SHIPPED_SECRETS = {
    ("discord", "execute_webhook"): ("token",),
    ("discord", "execute_webhook_compatible"): ("token",),
    ("discord", "edit_webhook_message"): ("token",),
    ("discord", "webhook_with_token"): ("token",),
    ("discord", "interaction_callback"): ("token",),
    ("generic", "bot_api"): ("token",),
}


def test_the_shipped_packs_mark_every_token_in_a_path_secret() -> None:
    marked = {}
    for pack in shipped_packs():
        policy = load_policy(pack)
        for each in (*policy.routes, policy.default):
            if each.secret_path_params:
                marked[(pack, each.name)] = each.secret_path_params
            # A parameter named like a token and left unmarked would be stored as it came.
            tokens = {name for name in param_names(each.match.path) if "token" in name}
            assert tokens <= set(each.secret_path_params), (pack, each.name)
    assert marked == SHIPPED_SECRETS


@pytest.mark.parametrize(
    ("pack", "method", "path", "shown"),
    [
        ("discord", "POST", f"/v10/webhooks/5/{TOKEN}", "/v10/webhooks/5/{token}"),
        ("discord", "POST", f"/v10/webhooks/5/{TOKEN}/slack", "/v10/webhooks/5/{token}/slack"),
        (
            "discord",
            "PATCH",
            f"/v10/webhooks/5/{TOKEN}/messages/9",
            "/v10/webhooks/5/{token}/messages/9",
        ),
        (
            "discord",
            "POST",
            f"/v10/interactions/7/{TOKEN}/callback",
            "/v10/interactions/7/{token}/callback",
        ),
        ("discord", "PATCH", f"/v10/webhooks/5/{TOKEN}", "/v10/webhooks/5/{token}"),
        ("discord", "DELETE", f"/v10/webhooks/5/{TOKEN}/", "/v10/webhooks/5/{token}/"),
        ("generic", "POST", f"/bot{TOKEN}/sendMessage", "/bot{token}/sendMessage"),
    ],
)
def test_the_shipped_routes_show_their_tokens_as_placeholders(
    pack: str, method: str, path: str, shown: str
) -> None:
    taken = RouteMatcher(load_policy(pack)).match(method, path)
    assert shown_path(taken, path) == shown
