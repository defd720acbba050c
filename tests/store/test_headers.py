"""Stored headers that come back exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from idemproxy.store import headers

# aiohttp decodes header bytes with surrogateescape, so header text may hold lone surrogates.
HEADER_TEXT = st.text(st.characters(exclude_categories=()))


@given(st.lists(st.tuples(HEADER_TEXT, HEADER_TEXT), max_size=8))
def test_headers_round_trip_exactly(pairs: list[tuple[str, str]]) -> None:
    stored = tuple(pairs)
    assert headers.load_headers(headers.dump_headers(stored)) == stored


def test_ascii_headers_are_stored_as_plain_json() -> None:
    assert headers.dump_headers((("content-type", "text/plain"),)) == (
        b'[["content-type","text/plain"]]'
    )
