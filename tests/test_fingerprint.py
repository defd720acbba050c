"""Fingerprints: equal for re-sends of one effect, different for a different effect."""

from __future__ import annotations

import json

import orjson
import pytest
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


FORM = "application/x-www-form-urlencoded"


def test_form_fields_keep_the_order_of_repeated_names() -> None:
    # Stripe's line items: the pairing of each price with its quantity is in the order.
    a = b"items[][price]=A&items[][qty]=1&items[][price]=B&items[][qty]=5"
    b = b"items[][price]=A&items[][qty]=5&items[][price]=B&items[][qty]=1"
    assert fp(a, FORM) != fp(b, FORM)
    # Fields of different names may come in any order.
    c = b"items[][qty]=1&items[][price]=A&items[][qty]=5&items[][price]=B"
    assert fp(a, FORM) == fp(c, FORM)


def test_a_form_with_a_stray_separator_still_honours_volatile_fields() -> None:
    a = b"amount=100&metadata[nonce]=1&"
    b = b"amount=100&&metadata[nonce]=2"
    assert fp(a, FORM, ("/metadata/nonce",)) == fp(b, FORM, ("/metadata/nonce",))


def test_forms_with_bytes_that_are_not_utf8_stay_distinct() -> None:
    assert fp(b"text=%FF", FORM) != fp(b"text=%FE", FORM)


def test_wildcard_pointers_reach_every_element() -> None:
    def writes(*stamps: str) -> bytes:
        return orjson.dumps(
            {
                "repo": "did:plc:abc",
                "writes": [
                    {
                        "collection": "app.bsky.feed.post",
                        "value": {"text": f"post {n}", "createdAt": stamp},
                    }
                    for n, stamp in enumerate(stamps)
                ],
            }
        )

    volatile = ("/writes/*/value/createdAt",)
    assert fp(writes("1", "2"), volatile=volatile) == fp(writes("3", "4"), volatile=volatile)
    assert fp(writes("1", "2")) != fp(writes("3", "4"))
    assert fp(writes("1"), volatile=volatile) != fp(writes("1", "2"), volatile=volatile)


def test_a_wildcard_reaches_every_member_of_an_object() -> None:
    a = orjson.dumps({"embeds": {"x": {"ts": 1, "t": "a"}, "y": {"ts": 2, "t": "b"}}})
    b = orjson.dumps({"embeds": {"x": {"ts": 3, "t": "a"}, "y": {"ts": 4, "t": "b"}}})
    assert fp(a, volatile=("/embeds/*/ts",)) == fp(b, volatile=("/embeds/*/ts",))


def multipart(boundary: str, *parts: tuple[str, str | None, str | None, bytes]) -> bytes:
    """A multipart/form-data body as HTTP clients write it."""
    out = b""
    for name, filename, content_type, content in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        if content_type is not None:
            out += f"Content-Type: {content_type}\r\n".encode()
        out += b"\r\n" + content + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def multipart_type(boundary: str) -> str:
    return f"multipart/form-data; boundary={boundary}"


UPLOAD = (
    ("purpose", None, None, b"assistants"),
    ("file", "notes.txt", "text/plain", b"the notes\r\n--not-a-boundary\r\n"),
)


def test_multipart_bodies_do_not_depend_on_their_boundary() -> None:
    a = multipart("a1b2c3", *UPLOAD)
    b = multipart("------WebKitFormBoundaryXyZ", *UPLOAD)
    assert a != b
    assert fp(a, multipart_type("a1b2c3")) == fp(b, multipart_type('"------WebKitFormBoundaryXyZ"'))


@pytest.mark.parametrize(
    "changed",
    [
        (UPLOAD[0], ("file", "other.txt", "text/plain", UPLOAD[1][3])),
        (UPLOAD[0], ("file", "notes.txt", "application/pdf", UPLOAD[1][3])),
        (UPLOAD[0], ("file", "notes.txt", "text/plain", b"other notes")),
        (UPLOAD[0], ("upload", "notes.txt", "text/plain", UPLOAD[1][3])),
        (UPLOAD[1], UPLOAD[0]),
    ],
)
def test_each_part_counts_by_name_filename_type_content_and_place(
    changed: tuple[tuple[str, str | None, str | None, bytes], ...],
) -> None:
    base = fp(multipart("b", *UPLOAD), multipart_type("b"))
    assert fp(multipart("b", *changed), multipart_type("b")) != base


def test_volatile_fields_reach_into_json_parts() -> None:
    def send(nonce: str, content: str = "hi") -> bytes:
        payload = orjson.dumps({"content": content, "nonce": nonce})
        return multipart(
            nonce * 3,
            ("payload_json", None, "text/plain; charset=utf-8", payload),
            ("files[0]", "report.txt", "application/octet-stream", b"figures"),
        )

    volatile = ("/nonce", "/payload_json/nonce")
    a, b = send("111"), send("222")
    assert fp(a, multipart_type("111111111"), volatile) == fp(
        b, multipart_type("222222222"), volatile
    )
    assert fp(a, multipart_type("111111111")) != fp(b, multipart_type("222222222"))
    c = send("333", content="other")
    assert fp(c, multipart_type("333333333"), volatile) != fp(
        a, multipart_type("111111111"), volatile
    )


def test_a_volatile_pointer_of_one_token_drops_a_whole_part() -> None:
    a = multipart("b", ("text", None, None, b"hi"), ("sent_at", None, None, b"1"))
    b = multipart("b", ("text", None, None, b"hi"), ("sent_at", None, None, b"2"))
    assert fp(a, multipart_type("b"), ("/sent_at",)) == fp(b, multipart_type("b"), ("/sent_at",))


def test_a_multipart_body_that_does_not_parse_is_taken_byte_for_byte() -> None:
    broken = multipart("b", *UPLOAD)[:-10]  # no closing delimiter
    assert canonical_body(broken, multipart_type("b"), ()) == broken
    assert canonical_body(b"x", "multipart/form-data", ()) == b"x"  # no boundary
