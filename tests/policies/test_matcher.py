"""Route matching: the first route whose methods and template take a request, else the
policy's default."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.policies.loader import load_policy, parse_policy, shipped_packs
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.templates import methods_cover
from tests.policies.strategies import METHODS, matches, paths

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


PACKS = {name: load_policy(name) for name in shipped_packs()}
MATCHERS = {name: RouteMatcher(policy) for name, policy in PACKS.items()}


@given(st.sampled_from(sorted(PACKS)), METHODS, paths())
def test_a_request_no_route_takes_gets_the_packs_default(pack: str, method: str, path: str) -> None:
    policy = PACKS[pack]
    route = MATCHERS[pack].match(method, path)
    taking = [
        r
        for r in policy.routes
        if methods_cover(r.match.methods, (method,)) and matches(r.match.path, path)
    ]
    assert route == (taking[0] if taking else policy.default)
