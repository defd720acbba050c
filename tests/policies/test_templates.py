"""Path templates and route matching, including which routes an earlier one makes unreachable."""

from __future__ import annotations

import functools
import re

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.policies.loader import load_policy, parse_policy, shipped_packs
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.templates import compile_template, methods_cover, template_covers

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

# Small alphabets, so generated templates and paths often meet.
LITERALS = st.sampled_from(["a", "b", "v10"])
# A placeholder stands alone in its segment or after a literal prefix ("v{p}", like "bot{token}").
PREFIXES = st.sampled_from(["", "", "v", "v1"])
SEGMENTS = st.one_of(LITERALS, PREFIXES.map(lambda prefix: prefix + "{p}"))
PATH_SEGMENTS = st.one_of(LITERALS, st.sampled_from(["c", "", "a.b", "v", "v1"]))
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE"])


@st.composite
def templates(draw: st.DrawFn) -> str:
    # Placeholders are numbered apart: a template may not name two alike.
    parts = [
        part.replace("{p}", f"{{p{index}}}")
        for index, part in enumerate(draw(st.lists(SEGMENTS, max_size=4)))
    ]
    if draw(st.booleans()):
        parts.append("{rest*}")
    return "/" + "/".join(parts)


@st.composite
def paths(draw: st.DrawFn) -> str:
    path = "/" + "/".join(draw(st.lists(PATH_SEGMENTS, max_size=5)))
    return path + ("/" if draw(st.booleans()) else "")


@functools.cache
def compiled(template: str) -> re.Pattern[str]:
    return compile_template(template)


def matches(template: str, path: str) -> bool:
    return compiled(template).fullmatch(path) is not None


@given(templates(), templates(), paths())
def test_a_covering_template_matches_every_path_the_covered_one_does(
    wide: str, narrow: str, path: str
) -> None:
    if template_covers(wide, narrow) and matches(narrow, path):
        assert matches(wide, path)


@given(templates())
def test_every_template_covers_itself(template: str) -> None:
    assert template_covers(template, template)


def test_coverage_is_decided_segment_by_segment() -> None:
    assert template_covers("/{rest*}", "/channels/{id}/messages")
    assert template_covers("/channels/{id}", "/channels/123")
    assert template_covers("/{v}/channels/{c}/messages/{rest*}", "/v10/channels/1/messages/2/x")
    assert not template_covers("/channels/123", "/channels/{id}")
    assert not template_covers("/channels/{id}", "/channels/{id}/messages")
    assert not template_covers("/channels/{id}/{rest*}", "/{rest*}")
    assert not template_covers("/a/{x}/@me", "/a/{x}/{user}")


def test_a_placeholder_may_follow_a_literal_prefix_in_its_segment() -> None:
    bot = compile_template("/bot{token}/{method}").fullmatch("/bot123:AAH-x_y/sendMessage")
    assert bot is not None
    assert bot.groupdict() == {"token": "123:AAH-x_y", "method": "sendMessage"}
    for path in ("/bot/sendMessage", "/xbot1/sendMessage", "/bot1/a/sendMessage", "/bot1"):
        assert not matches("/bot{token}/{method}", path)


def test_a_prefixed_placeholder_covers_what_its_prefix_and_one_more_character_cover() -> None:
    assert template_covers("/{a}/{m}", "/bot{token}/{m}")
    assert not template_covers("/bot{token}/{m}", "/{a}/{m}")
    assert template_covers("/bot{token}/x", "/bot123/x")
    assert not template_covers("/bot{token}/x", "/bot/x")
    assert template_covers("/b{t}", "/bot{x}")
    assert not template_covers("/bot{t}", "/b{x}")
    assert not template_covers("/bot{t}", "/{rest*}")


@given(st.lists(METHODS, min_size=1, unique=True), st.lists(METHODS, min_size=1, unique=True))
def test_methods_cover_exactly_their_subsets(wide: list[str], narrow: list[str]) -> None:
    assert methods_cover(tuple(wide), tuple(narrow)) == set(narrow).issubset(wide)
    assert methods_cover(("*",), tuple(narrow))
    assert not methods_cover(tuple(wide), ("*",))


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
