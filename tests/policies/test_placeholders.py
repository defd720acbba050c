"""Request templates in policies: checked when the policy loads, filled or refused when used."""

from __future__ import annotations

import pytest

from idemproxy.errors import ConfigError
from idemproxy.policies.loader import parse_policy
from idemproxy.policies.placeholders import MissingValue, Values, fill_text, fill_value

URI = "at://did:plc:abc/app.bsky.feed.post/3kabc"


def route_policy(route_yaml: str) -> str:
    return (
        "name: mine\nroutes:\n  - name: create\n"
        '    match: {methods: [POST], path: "/v1/channels/{channel_id}/messages"}\n'
        f"    {route_yaml}\ndefault: {{name: other}}\n"
    )


def test_a_compensation_loads_with_its_templates() -> None:
    policy = parse_policy(
        route_policy(
            "compensation: {method: delete, path:"
            ' "/v1/channels/{path.channel_id}/messages/{response./id}"}'
        ),
        "mine.yaml",
    )
    compensation = policy.routes[0].compensation
    assert compensation is not None
    assert (
        compensation.describe() == "DELETE /v1/channels/{path.channel_id}/messages/{response./id}"
    )


@pytest.mark.parametrize(
    ("route_yaml", "message"),
    [
        ("compensation: {method: GET, path: /x}", "a compensation changes something"),
        ('compensation: {method: POST, path: "/x/{path.nope}"}', "(it has: channel_id)"),
        ('compensation: {method: POST, path: "/x/{request./a}"}', "keeps no request body"),
        ('compensation: {method: POST, path: "/x/{reply./a}"}', "is not a placeholder"),
        ('compensation: {method: POST, path: "/x/{response.id}"}', "is not a JSON pointer"),
        ('compensation: {method: POST, path: "/x/{response./id"}', "unmatched brace"),
        (
            "compensation: {method: POST, path: /x, json: {a: 1}, form: {b: c}}",
            "not both",
        ),
        ('append: {read: "/x/{response./v}"}', "cannot be used here"),
        ("append: {read: x}", "must be a path starting with '/'"),
        ("effect: safe\n    compensation: {method: POST, path: /x}", "no effect to compensate"),
        ("effect: generation\n    append: {read: /x}", "'append' is for external routes"),
    ],
)
def test_a_template_that_can_never_be_filled_is_refused_at_load(
    route_yaml: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=r"mine\.yaml") as refused:
        parse_policy(route_policy(route_yaml), "mine.yaml")
    assert message in str(refused.value)


def test_values_fill_paths_encoded_and_bodies_typed() -> None:
    values = Values(
        {"channel_id": "81"},
        response=b'{"id": "m/1", "uri": "' + URI.encode() + b'", "amount": 700}',
    )
    assert (
        fill_text("/c/{path.channel_id}/m/{response./id}", values, in_path=True) == "/c/81/m/m%2F1"
    )
    body = {"rkey": "{response./uri|segment:-1}", "repo": "{response./uri|segment:-3}",
            "amount": "{response./amount}", "note": "refund of {response./amount}"}  # fmt: skip
    assert fill_value(body, values) == {
        "rkey": "3kabc",
        "repo": "did:plc:abc",
        "amount": 700,
        "note": "refund of 700",
    }


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("{response./missing}", "the response has no value at /missing"),
        ("{path.other}", "the request path has no such parameter"),
        ("{response./id|segment:5}", "'m1' has no segment 5"),
    ],
)
def test_a_value_that_is_not_there_is_named(template: str, why: str) -> None:
    values = Values({"channel_id": "81"}, response=b'{"id": "m1"}')
    with pytest.raises(MissingValue) as missing:
        fill_text(template, values, in_path=False)
    assert missing.value.why == why
    assert str(missing.value).startswith(template)


def test_a_response_that_is_not_json_fills_nothing() -> None:
    with pytest.raises(MissingValue, match="the response body is not JSON"):
        fill_text("{response./id}", Values({}, response=b"<html>"), in_path=False)
