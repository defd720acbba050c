"""Content codings: decoded as applied, bounded, and refused with a reason when they cannot be."""

from __future__ import annotations

import gzip
import zlib

import pytest

from idemproxy.encodings import UndecodableBody, codings, decodable_only, decoded

BODY = b'{"content": "hello"}' * 50


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("encoded", "coding"),
    [
        (BODY, ""),
        (BODY, "identity"),
        (gzip.compress(BODY), "gzip"),
        (gzip.compress(BODY), "X-GZIP"),
        (zlib.compress(BODY), "deflate"),
        (raw_deflate(BODY), "deflate"),
        (zlib.compress(gzip.compress(BODY)), "gzip, deflate"),
    ],
)
def test_each_coding_is_undone_last_applied_first(encoded: bytes, coding: str) -> None:
    assert decoded(encoded, coding, len(BODY)) == BODY


def test_gzip_members_one_after_another_are_one_body() -> None:
    assert decoded(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip", 10) == b"abcd"


def test_the_same_content_gzipped_at_other_times_decodes_alike() -> None:
    assert decoded(gzip.compress(BODY, mtime=1), "gzip", 10_000) == decoded(
        gzip.compress(BODY, mtime=2), "gzip", 10_000
    )


def test_a_body_that_expands_past_the_limit_is_refused() -> None:
    bomb = gzip.compress(b"\0" * 1_000_000)
    with pytest.raises(UndecodableBody) as refused:
        decoded(bomb, "gzip", 1000)
    assert refused.value.too_large
    assert "more than 1000 bytes" in str(refused.value)


@pytest.mark.parametrize(
    ("encoded", "coding"),
    [
        (gzip.compress(BODY)[:-8], "gzip"),
        (b"not gzip at all", "gzip"),
        (b"not deflate", "deflate"),
    ],
)
def test_broken_bytes_are_refused(encoded: bytes, coding: str) -> None:
    with pytest.raises(UndecodableBody) as refused:
        decoded(encoded, coding, 10_000)
    assert not refused.value.unsupported
    assert not refused.value.too_large


@pytest.mark.parametrize("coding", ["br", "zstd", "compress"])
def test_a_coding_without_a_decoder_says_what_to_send(coding: str) -> None:
    with pytest.raises(UndecodableBody) as refused:
        decoded(BODY, coding, 10_000)
    assert refused.value.unsupported
    assert "gzip, deflate or uncompressed" in str(refused.value)


def test_codings_are_listed_in_the_order_applied() -> None:
    assert codings("gzip, identity ,Deflate") == ["gzip", "deflate"]


@pytest.mark.parametrize(
    ("accept_encoding", "narrowed"),
    [
        ("gzip, deflate, br, zstd", "gzip, deflate"),
        ("br;q=1.0, GZIP;q=0.8, x-gzip", "GZIP;q=0.8, x-gzip"),
        ("identity;q=0.5, *", "identity;q=0.5"),
        ("br, zstd", "identity"),
        ("*", "identity"),
        ("", "identity"),
    ],
)
def test_only_codings_the_proxy_decodes_are_asked_for(accept_encoding: str, narrowed: str) -> None:
    assert decodable_only(accept_encoding) == narrowed
