"""Effect key resolution (SPEC section 3)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy import effectkeys
from idemproxy.effectkeys import (
    KeyHeaders,
    KeySource,
    parse_idempotency_key,
    resolve_agent,
    resolve_effect_key,
)
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.policies.kinds import OnMissingKey, ToolCallEffects
from idemproxy.policies.route import Route

ROUTE = Route(name="write")
FP = "f" * 64
ids = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40)


def resolve(headers: KeyHeaders, route: Route = ROUTE, fp: str = FP):  # type: ignore[no-untyped-def]
    return resolve_effect_key(headers, route, "agent", fp)


def test_tool_call_wins_over_an_sdk_key() -> None:
    key = resolve(KeyHeaders(batch="b", tool_call="c", idempotency_key="random-sdk-key"))
    assert key is not None
    assert key.source is KeySource.TOOL_CALL
    assert not key.explicit
    again = resolve(KeyHeaders(batch="b", tool_call="c", idempotency_key="another-random-key"))
    assert again == key


def test_step_makes_the_key_explicit_and_independent_of_content() -> None:
    a = resolve(KeyHeaders(batch="b", tool_call="c", step="1"), fp="a" * 64)
    b = resolve(KeyHeaders(batch="b", tool_call="c", step="1"), fp="b" * 64)
    assert a == b
    assert a is not None
    assert a.explicit


def test_a_one_effect_route_keys_a_tool_call_by_its_route_not_its_wording() -> None:
    one = Route(name="post", tool_call_effects=ToolCallEffects.ONE)
    first = resolve(KeyHeaders(batch="b", tool_call="c"), one, fp="a" * 64)
    reworded = resolve(KeyHeaders(batch="b", tool_call="c"), one, fp="b" * 64)
    other_route = Route(name="upload", tool_call_effects=ToolCallEffects.ONE)
    upload = resolve(KeyHeaders(batch="b", tool_call="c"), other_route, fp="a" * 64)
    assert first == reworded
    assert first is not None
    assert upload is not None
    assert upload.record_key != first.record_key


def test_a_many_effects_route_keys_a_tool_call_by_its_request() -> None:
    a = resolve(KeyHeaders(batch="b", tool_call="c"), fp="a" * 64)
    b = resolve(KeyHeaders(batch="b", tool_call="c"), fp="b" * 64)
    assert a != b


def test_a_step_tells_effects_of_one_tool_call_apart_on_a_one_effect_route() -> None:
    one = Route(name="post", tool_call_effects=ToolCallEffects.ONE)
    keys = {str(resolve(KeyHeaders(batch="b", tool_call="c", step=s), one)) for s in "123"}
    assert len(keys) == 3
    assert str(resolve(KeyHeaders(batch="b", tool_call="c"), one)) not in keys


def test_idempotency_key_forms() -> None:
    assert parse_idempotency_key('"abc"') == "abc"
    assert parse_idempotency_key(r'"a\"b"') == 'a"b'
    assert parse_idempotency_key("8e03978e-40d5-43e8-bc93-6894a57f9324") == (
        "8e03978e-40d5-43e8-bc93-6894a57f9324"
    )
    for bad in ("", '""', "a b", "x" * 256, '"unterminated', "a,b", "caf\u00e9"):
        with pytest.raises(RequestRefused) as refused:
            parse_idempotency_key(bad)
        assert refused.value.code is ProblemCode.INVALID_IDEMPOTENCY_KEY


def test_missing_key_follows_the_route() -> None:
    with pytest.raises(RequestRefused) as refused:
        resolve(KeyHeaders())
    assert refused.value.code is ProblemCode.MISSING_IDEMPOTENCY_KEY
    passthrough = Route(name="w", on_missing_key=OnMissingKey.PASSTHROUGH)
    assert resolve(KeyHeaders(), passthrough) is None
    content = Route(name="w", on_missing_key=OnMissingKey.CONTENT, content_window_s=60)
    keyed = resolve(KeyHeaders(), content)
    assert keyed is not None
    assert keyed.source is KeySource.CONTENT
    # No time in the key: the record's life (content_window_s) is the window.
    assert keyed == resolve(KeyHeaders(), content)


def test_pinned_agent_refuses_another() -> None:
    assert resolve_agent(KeyHeaders(agent="a2"), "a1", allow_agent_header=True) == "a2"
    assert resolve_agent(KeyHeaders(agent="a1"), "a1", allow_agent_header=False) == "a1"
    with pytest.raises(RequestRefused):
        resolve_agent(KeyHeaders(agent="a2"), "a1", allow_agent_header=False)


@given(ids, ids, ids, ids)
def test_distinct_tool_calls_never_share_a_key(b1: str, c1: str, b2: str, c2: str) -> None:
    k1 = resolve(KeyHeaders(batch=b1, tool_call=c1, step="s"))
    k2 = resolve(KeyHeaders(batch=b2, tool_call=c2, step="s"))
    assert (k1 == k2) == ((b1, c1) == (b2, c2))


@given(ids.filter(lambda value: '"' not in value and "," not in value))
def test_explicit_keys_and_tool_calls_live_apart(value: str) -> None:
    explicit = resolve(KeyHeaders(idempotency_key=value))
    tool_call = resolve(KeyHeaders(batch=value, tool_call=value, step=value))
    assert explicit is not None
    assert tool_call is not None
    assert explicit.record_key != tool_call.record_key
    assert str(explicit).isascii()
    assert " " not in str(tool_call)


@given(st.text())
def test_a_key_part_is_what_quote_makes_of_it(value: str) -> None:
    # The shortcut for parts quote() would leave alone must never change a key.
    assert effectkeys._part(value) == quote(value, safe=effectkeys._PART_SAFE)
