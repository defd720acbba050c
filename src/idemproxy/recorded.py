"""Reading a recorded upstream answer: its body with the content coding undone, bounded.

A record keeps an answer as the upstream sent it, gzip and all: the agent asked for that
coding, and a replay must be the bytes it first got. What the proxy itself reads in the answer
(the external id, the values a compensation is filled from) it reads in the decoded body.

The bound is the route's ``max_recorded_bytes``: a compressed answer then yields what the same
answer sent uncompressed would have, whose record stops there too, and a small compressed
body cannot grow past it in memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from idemproxy.encodings import UndecodableBody, decoded
from idemproxy.store.records import StoredResponse


def content_encoding(headers: Iterable[tuple[str, str]]) -> str:
    """The ``Content-Encoding`` of stored headers, "" for none."""
    return ", ".join(value for name, value in headers if name.lower() == "content-encoding")


def readable_body(response: StoredResponse, limit_bytes: int) -> bytes:
    """The body of ``response`` as the upstream meant it, coding undone.

    Raises :class:`UndecodableBody` for a body recorded only in part (a cut compressed stream
    cannot be undone, and a cut JSON document is none) and for one that cannot be decoded
    within ``limit_bytes``.
    """
    if response.body_truncated:
        raise UndecodableBody(
            "the answer was recorded only in part (it broke off, or passed the route's"
            " max_recorded_bytes)"
        )
    return decoded(response.body, content_encoding(response.headers), limit_bytes)
