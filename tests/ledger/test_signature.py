"""Delivery signatures: what a controller checks, and what it must refuse."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.ledger.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers, verify

SECRET = "whsec-0123456789abcdef"
NOW_S = 1_767_225_600


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    body = b'{"agent":"bot","events":[]}'
    headers = signed_headers(SECRET, body, NOW_S)
    expected = hmac.new(SECRET.encode(), f"{NOW_S}.".encode() + body, hashlib.sha256).hexdigest()
    assert headers == {TIMESTAMP_HEADER: str(NOW_S), SIGNATURE_HEADER: f"v1={expected}"}
    assert verify(SECRET, headers, body, now_s=NOW_S + 10)


@given(st.binary(), st.binary(min_size=1))
def test_any_change_to_the_body_is_caught(body: bytes, tail: bytes) -> None:
    headers = signed_headers(SECRET, body, NOW_S)
    assert verify(SECRET, headers, body, now_s=NOW_S)
    assert not verify(SECRET, headers, body + tail, now_s=NOW_S)


def test_a_wrong_secret_a_stale_timestamp_or_missing_headers_fail() -> None:
    body = b"{}"
    headers = signed_headers(SECRET, body, NOW_S)
    assert not verify("another-secret-0123456789", headers, body, now_s=NOW_S)
    assert not verify(SECRET, headers, body, now_s=NOW_S + 301)
    assert not verify(SECRET, {**headers, TIMESTAMP_HEADER: str(NOW_S + 1)}, body, now_s=NOW_S)
    assert not verify(SECRET, {SIGNATURE_HEADER: headers[SIGNATURE_HEADER]}, body, now_s=NOW_S)
    assert not verify(SECRET, {**headers, TIMESTAMP_HEADER: "soon"}, body, now_s=NOW_S)
