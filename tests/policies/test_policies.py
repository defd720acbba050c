"""Policy documents: validation errors a user can act on, and route matching."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.errors import ConfigError
from idemproxy.policies.loader import load_policy, parse_policy, shipped_packs
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.model import EffectClass

POLICY = """
name: chat
routes:
  - name: read_message
    match: {methods: GET, path: "/channels/{channel}/messages/{id}"}
    effect: safe
  - name: create_message
    match: {methods: [POST], path: "/channels/{channel}/messages"}
    volatile_fields: ["/nonce"]
  - name: files
    match: {methods: ["*"], path: "/files/{rest*}"}
default: {name: other}
"""


def test_generic_pack_ships_and_classifies_methods() -> None:
    assert "generic" in shipped_packs()
    matcher = RouteMatcher(load_policy("generic"))
    for method in ("GET", "HEAD", "OPTIONS"):
        assert matcher.match(method, "/anything").effect is EffectClass.SAFE
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert matcher.match(method, "/anything").effect is EffectClass.EXTERNAL


def test_routes_match_by_method_and_template() -> None:
    matcher = RouteMatcher(parse_policy(POLICY, "test"))
    assert matcher.match("GET", "/channels/1/messages/2").name == "read_message"
    assert matcher.match("POST", "/channels/1/messages").name == "create_message"
    assert matcher.match("POST", "/channels/1/messages/").name == "create_message"
    assert matcher.match("DELETE", "/files/a/b/c").name == "files"
    assert matcher.match("PUT", "/files").name == "files"
    assert matcher.match("POST", "/channels/1/messages/2/x").name == "other"
    assert matcher.match("PATCH", "/channels/1/messages/2").name == "other"


@given(st.text(st.characters(blacklist_characters="/", min_codepoint=0x21), min_size=1))
def test_a_single_segment_placeholder_never_spans_segments(segment: str) -> None:
    matcher = RouteMatcher(parse_policy(POLICY, "test"))
    assert matcher.match("POST", f"/channels/{segment}/messages").name == "create_message"
    assert matcher.match("POST", f"/channels/{segment}/x/messages").name == "other"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("name: x\ndefault: {name: w, efect: safe}", "default.efect: unknown key"),
        ("name: x\ndefault: {name: w, effect: sometimes}", "default.effect"),
        ("name: x\ndefault: {name: w, volatile_fields: [nonce]}", "JSON pointer"),
        ("name: x\ndefault: {name: w, retry: {attempts: 2}}", "only allowed on safe routes"),
        ("name: x\ndefault: {name: w, match: {methods: [FETCH]}}", "unknown HTTP method"),
        ("name: x\ndefault: {name: w, match: {path: 'no-slash'}}", "must start with '/'"),
        ("name: x\ndefault: {name: w, match: {path: '/{a*}/b'}}", "last segment"),
        ("name: x\ndefault: {name: w, lease_ms: 5}", "default.lease_ms"),
        ("name: x\nroutes: [{name: w}]\ndefault: {name: w}", "used twice"),
        ("name: x\n", "default: required"),
        ("[1, 2]", "YAML mapping"),
        ("name: x\ndefault: {name: w\n", "not valid YAML"),
    ],
)
def test_bad_policies_say_where_and_how_to_fix(document: str, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_policy(document, "my-policy.yaml")
    assert str(error.value).startswith("my-policy.yaml, line ")
    assert expected in str(error.value)
