"""Path templates: which paths one matches, and which templates cover others."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.policies.templates import compile_template, methods_cover, template_covers
from tests.policies.strategies import METHODS, matches, paths, templates


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
