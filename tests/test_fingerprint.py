"""Fingerprints: equal for re-sends of one effect, different for a different effect."""

from __future__ import annotations

import json

import orjson
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.fingerprint import canonical_body, fingerprint

JSON = "application/json"
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def dumps(document: object) -> bytes:
    return json.dumps(document).encode()


def fp(body: bytes, content_type: str = JSON, volatile: tuple[str, ...] = (), **kw: str) -> str:
    return fingerprint(
        kw.get("method", "POST"),
        kw.get("upstream", "up"),
        kw.get("path", "/messages"),
        kw.get("query", ""),
        body,
        content_type,
        volatile,
    )


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
def test_json_key_order_does_not_matter(document: dict[str, object]) -> None:
    reordered = dict(reversed(list(document.items())))
    assert fp(dumps(document)) == fp(dumps(reordered))


@given(json_values, st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=10))
def test_volatile_field_values_do_not_matter(payload: object, nonce_a: str, nonce_b: str) -> None:
    a = dumps({"payload": payload, "nonce": nonce_a})
    b = dumps({"nonce": nonce_b, "payload": payload})
    assert fp(a, volatile=("/nonce",)) == fp(b, volatile=("/nonce",))


@given(json_values, json_values)
def test_different_content_differs(a: object, b: object) -> None:
    if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
        assert fp(dumps({"x": a})) != fp(dumps({"x": b}))


def test_integers_beyond_64_bits_stay_distinct() -> None:
    assert fp(b'{"n": 100000000000000000000}') != fp(b'{"n": 100000000000000000001}')
    assert fp(b'{"n": 100000000000000000000}') != fp(b'{"n": 1e20}')
    # A wide number in a volatile field changes nothing.
    a = b'{"nonce": 1234567890123456789012, "t": "x"}'
    b = b'{"nonce": 12, "t": "x"}'
    assert fp(a, volatile=("/nonce",)) == fp(b, volatile=("/nonce",))


def test_nested_volatile_pointer_and_escapes() -> None:
    a = {"record": {"createdAt": "1", "text": "hi"}, "a/b": 1}
    b = {"record": {"createdAt": "2", "text": "hi"}, "a/b": 2}
    volatile = ("/record/createdAt", "/a~1b")
    assert fp(orjson.dumps(a), volatile=volatile) == fp(orjson.dumps(b), volatile=volatile)
    assert fp(orjson.dumps(a)) != fp(orjson.dumps(b))


def test_method_upstream_path_and_query_are_part_of_the_identity() -> None:
    base = fp(b"{}")
    assert fp(b"{}", method="PUT") != base
    assert fp(b"{}", upstream="other") != base
    assert fp(b"{}", path="/other") != base
    assert fp(b"{}", query="a=1") != base
    assert fp(b"{}", query="b=2&a=1") == fp(b"{}", query="a=1&b=2")


def test_form_bodies_are_canonical_and_honour_volatile_fields() -> None:
    form = "application/x-www-form-urlencoded"
    a = b"amount=100&currency=usd&metadata[nonce]=1"
    b = b"currency=usd&metadata[nonce]=2&amount=100"
    assert fp(a, form, ("/metadata/nonce",)) == fp(b, form, ("/metadata/nonce",))
    assert fp(a, form) != fp(b, form)


def test_non_json_bodies_are_taken_byte_for_byte() -> None:
    assert canonical_body(b"\xff\x00raw", "application/octet-stream", ("/x",)) == b"\xff\x00raw"
    assert canonical_body(b"{not json", JSON, ("/x",)) == b"{not json"
    assert fp(b"a", "text/plain") != fp(b"b", "text/plain")
