"""multipart/form-data bodies (RFC 7578, framed as RFC 2046 section 5.1.1).

Clients draw a random boundary for every request, so the proxy reads a multipart body as its
parts in order, each with the name, file name and content type its headers give, to tell one
request from another independently of the boundary. It also rewrites one part in place (a
native key inside a JSON part) and leaves every other byte as the client wrote it.

A body that does not follow the framing (no closing delimiter, a bare LF line end) is not
parsed: callers fall back to its bytes.
"""

from __future__ import annotations

import email.parser
import email.policy
from dataclasses import dataclass

_CRLF = b"\r\n"
_HEADER_END = b"\r\n\r\n"
_PADDING = b" \t"
_HEADERS = email.parser.BytesHeaderParser(policy=email.policy.HTTP)


@dataclass(frozen=True, slots=True)
class Part:
    """One part; ``start``:``end`` is where its content stands in the body."""

    name: str
    filename: str | None
    content_type: str  # the media type alone, lower case; text/plain where none is given
    content: bytes
    start: int
    end: int


def boundary_of(content_type: str) -> str | None:
    """The boundary parameter of a ``multipart/form-data`` content type, or None."""
    header = _HEADERS.parsebytes(b"Content-Type: " + content_type.encode("latin-1") + _HEADER_END)
    if header.get_content_type() != "multipart/form-data":
        return None
    boundary = header.get_param("boundary")
    return boundary if isinstance(boundary, str) and 0 < len(boundary) <= 70 else None


def parse(body: bytes, boundary: str) -> list[Part] | None:
    """The parts of ``body`` in order, or None when it is not framed by ``boundary``."""
    dash = b"--" + boundary.encode("latin-1")
    if body.startswith(dash):
        cursor = len(dash)
    else:  # a preamble before the first delimiter
        found = body.find(_CRLF + dash)
        if found < 0:
            return None
        cursor = found + len(_CRLF + dash)
    delimiter = _CRLF + dash
    parts: list[Part] = []
    while True:
        if body.startswith(b"--", cursor):
            return parts  # the close delimiter; whatever follows is the epilogue
        line_end = body.find(_CRLF, cursor)
        if line_end < 0 or body[cursor:line_end].strip(_PADDING):
            return None
        next_delimiter = body.find(delimiter, line_end + len(_CRLF))
        if next_delimiter < 0:
            return None
        part = _part(body, line_end + len(_CRLF), next_delimiter)
        if part is None:
            return None
        parts.append(part)
        cursor = next_delimiter + len(delimiter)


def _part(body: bytes, start: int, end: int) -> Part | None:
    if body.startswith(_CRLF, start):  # no headers at all
        head, content_start = b"", start + len(_CRLF)
    else:
        header_end = body.find(_HEADER_END, start, end)
        if header_end < 0:
            return None
        head, content_start = body[start:header_end], header_end + len(_HEADER_END)
    headers = _HEADERS.parsebytes(head + _HEADER_END)
    name = headers.get_param("name", header="content-disposition")
    if not isinstance(name, str):
        return None
    return Part(
        name=name,
        filename=headers.get_filename(),
        content_type=headers.get_content_type(),
        content=body[content_start:end],
        start=content_start,
        end=end,
    )


def replaced(body: bytes, boundary: str, part: Part, content: bytes) -> bytes | None:
    """``body`` with ``part``'s content replaced; None if the new content would hold the
    boundary (the body could then not be read back as the same parts)."""
    if b"--" + boundary.encode("latin-1") in content:
        return None
    return body[: part.start] + content + body[part.end :]
