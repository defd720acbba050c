"""Recorded answers read decoded, within the bound, and never from a body cut short."""

from __future__ import annotations

import gzip
import zlib

import pytest

from idemproxy.encodings import UndecodableBody
from idemproxy.recorded import content_encoding, readable_body
from idemproxy.store.records import StoredResponse

BODY = b'{"id": "ch_1"}'


def stored(body: bytes, *coding: str, truncated: bool = False) -> StoredResponse:
    headers = (("Content-Type", "application/json"), *(("content-encoding", c) for c in coding))
    return StoredResponse(200, headers, body, body_truncated=truncated)


def test_the_content_encoding_of_stored_headers_joins_every_field() -> None:
    headers = (("Content-Encoding", "gzip"), ("ETag", "x"), ("content-encoding", "deflate"))
    assert content_encoding(headers) == "gzip, deflate"
    assert content_encoding((("ETag", "x"),)) == ""


@pytest.mark.parametrize(
    "response",
    [
        stored(BODY),
        stored(gzip.compress(BODY), "gzip"),
        stored(zlib.compress(gzip.compress(BODY)), "gzip", "deflate"),
    ],
)
def test_a_recorded_answer_reads_as_the_upstream_meant_it(response: StoredResponse) -> None:
    assert readable_body(response, 1024) == BODY


def test_an_answer_recorded_only_in_part_is_not_read() -> None:
    with pytest.raises(UndecodableBody, match="recorded only in part"):
        readable_body(stored(gzip.compress(BODY)[:10], "gzip", truncated=True), 1024)


def test_an_answer_that_decodes_past_the_bound_is_not_read() -> None:
    with pytest.raises(UndecodableBody) as raised:
        readable_body(stored(gzip.compress(BODY), "gzip"), len(BODY) - 1)
    assert raised.value.too_large
