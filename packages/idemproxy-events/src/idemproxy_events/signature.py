"""The signature on each delivery: HMAC-SHA256, keyed with ``controller.secret``, over the
``Idem-Timestamp`` value, a dot and the raw body bytes::

    Idem-Timestamp: 1767225600                       unix seconds when it was signed
    Idem-Signature: v1=<64 lower-case hex digits>    HMAC-SHA256(secret, "<timestamp>." + body)

:func:`verify` recomputes it over the body exactly as received, compares in constant time and
rejects a timestamp more than five minutes from the controller's clock (a replayed delivery).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Protocol

TIMESTAMP_HEADER = "Idem-Timestamp"
SIGNATURE_HEADER = "Idem-Signature"
VERSION = "v1"
TOLERANCE_S = 300


class Headers(Protocol):
    """Request headers as any server gives them: a mapping, ``http.server``'s message, ..."""

    def get(self, name: str, /) -> str | None: ...


def signature(secret: str, timestamp_s: int, body: bytes) -> str:
    """The ``Idem-Signature`` value for ``body`` signed at ``timestamp_s``."""
    signed = f"{timestamp_s}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def signed_headers(secret: str, body: bytes, timestamp_s: int | None = None) -> dict[str, str]:
    """The two headers a delivery of ``body`` carries (to test a controller with)."""
    timestamp_s = int(time.time()) if timestamp_s is None else timestamp_s
    return {
        TIMESTAMP_HEADER: str(timestamp_s),
        SIGNATURE_HEADER: signature(secret, timestamp_s, body),
    }


def verify(
    secret: str,
    headers: Headers,
    body: bytes,
    now_s: float | None = None,
    tolerance_s: int = TOLERANCE_S,
) -> bool:
    """True if ``body`` was signed with ``secret`` within ``tolerance_s`` of ``now_s``.

    ``headers`` must look names up case-insensitively (as ``http.server``'s, WSGI frameworks',
    aiohttp's and Starlette's header mappings do) or hold them spelled as above.
    """
    timestamp = headers.get(TIMESTAMP_HEADER) or ""
    received = headers.get(SIGNATURE_HEADER) or ""
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    now_s = time.time() if now_s is None else now_s
    if abs(now_s - int(timestamp)) > tolerance_s:
        return False
    expected = signature(secret, int(timestamp), body)
    return hmac.compare_digest(received.encode(), expected.encode())
