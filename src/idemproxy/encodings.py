"""Content codings (RFC 9110 section 8.4): the bytes behind ``Content-Encoding``, bounded.

A request body on an effectful route is decoded once, for its identity and for what is sent on
(proxy/body.py); an answer is decoded only to be read (its external id, a compensation) and
is recorded and replayed in the coding it came with. gzip and deflate, the codings every HTTP
client library sends by default, come with the standard library; br and zstd would each need a
library, and are refused on requests and not asked for on the answers the proxy reads. Every
decoder stops as soon as the output passes the caller's limit, so a small compressed body
cannot expand into a large one in memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

IDENTITY = "identity"
_GZIP = frozenset({"gzip", "x-gzip"})
_DEFLATE = "deflate"


class UndecodableBody(ValueError):
    """A body whose coding is unknown, broken, or that decodes to more than the limit."""

    def __init__(self, message: str, *, unsupported: bool = False, too_large: bool = False):
        super().__init__(message)
        self.unsupported = unsupported
        self.too_large = too_large


def codings(content_encoding: str) -> list[str]:
    """The codings of a ``Content-Encoding`` value in the order they were applied."""
    return [
        token.strip().lower()
        for token in content_encoding.split(",")
        if token.strip() and token.strip().lower() != IDENTITY
    ]


# What this module decodes, in the form of an ``Accept-Encoding`` value.
ACCEPTED = "gzip, deflate"
_DECODABLE = _GZIP | {_DEFLATE, IDENTITY}


def decodable_only(accept_encoding: str) -> str:
    """``accept_encoding`` with only the codings this module decodes left in it.

    A coding keeps its weight (``gzip;q=0.5``); ``*`` goes, as it would let the sender pick br
    or zstd. With nothing left the answer is asked for uncompressed.
    """
    kept = [
        element.strip()
        for element in accept_encoding.split(",")
        if element.split(";", 1)[0].strip().lower() in _DECODABLE
    ]
    return ", ".join(kept) or IDENTITY


def decoded(body: bytes, content_encoding: str, limit_bytes: int) -> bytes:
    """``body`` with every coding of ``content_encoding`` undone, last applied first.

    Raises :class:`UndecodableBody` for a coding this process cannot decode, for bytes that are
    not what the coding says, and for output beyond ``limit_bytes``.
    """
    for coding in reversed(codings(content_encoding)):
        body = _decoder(coding)(body, limit_bytes)
    return body


def _decoder(coding: str) -> Callable[[bytes, int], bytes]:
    if coding in _GZIP:
        return _gunzip
    if coding == _DEFLATE:
        return _inflate
    raise UndecodableBody(
        f"content coding {coding!r} cannot be decoded here; send the body gzip, deflate or"
        " uncompressed",
        unsupported=True,
    )


def _too_large(limit_bytes: int) -> UndecodableBody:
    return UndecodableBody(f"the body decodes to more than {limit_bytes} bytes", too_large=True)


def _drain(decompressor: zlib._Decompress, data: bytes, limit_bytes: int) -> bytes:
    """Run one zlib stream; max_length stops it one byte past the limit."""
    out = decompressor.decompress(data, limit_bytes + 1)
    if len(out) > limit_bytes or decompressor.unconsumed_tail:
        raise _too_large(limit_bytes)
    if not decompressor.eof:
        raise UndecodableBody("the compressed body ends before its stream does")
    return out


def _gunzip(body: bytes, limit_bytes: int) -> bytes:
    # A gzip file may hold several members one after the other (RFC 1952 section 2.2).
    parts: list[bytes] = []
    size = 0
    rest = body
    try:
        while True:
            decompressor = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            part = _drain(decompressor, rest, limit_bytes - size)
            parts.append(part)
            size += len(part)
            rest = decompressor.unused_data
            if not rest.strip(b"\0"):  # some writers pad the end with zero bytes
                return b"".join(parts)
    except zlib.error as exc:
        raise UndecodableBody(f"the body is not valid gzip ({exc})") from exc


def _inflate(body: bytes, limit_bytes: int) -> bytes:
    # "deflate" means the zlib format (RFC 1950); some senders use raw deflate, which this
    # accepts too, as browsers and curl do.
    try:
        return _drain(zlib.decompressobj(wbits=zlib.MAX_WBITS), body, limit_bytes)
    except zlib.error:
        pass
    try:
        return _drain(zlib.decompressobj(wbits=-zlib.MAX_WBITS), body, limit_bytes)
    except zlib.error as exc:
        raise UndecodableBody(f"the body is not valid deflate ({exc})") from exc
