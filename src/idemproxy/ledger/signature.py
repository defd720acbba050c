"""Signatures on deliveries to the recovery controller: HMAC-SHA256 over timestamp and body.

A delivery carries::

    Idem-Timestamp: 1767225600                       unix seconds when it was signed
    Idem-Signature: v1=<64 lower-case hex digits>    HMAC-SHA256(secret, "<timestamp>." + body)

A controller recomputes the HMAC over the raw body bytes it received, compares in constant
time, and rejects timestamps too far from its own clock (replays). :func:`verify` does exactly
that. A controller imports the same functions from ``idemproxy-events``
(packages/idemproxy-events), which needs only the standard library; tests/events checks the two
agree. docs/recovery.md has the recipe for other languages.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

TIMESTAMP_HEADER = "Idem-Timestamp"
SIGNATURE_HEADER = "Idem-Signature"
VERSION = "v1"
TOLERANCE_S = 300


def signature(secret: str, timestamp_s: int, body: bytes) -> str:
    """The ``Idem-Signature`` value for ``body`` signed at ``timestamp_s``."""
    signed = f"{timestamp_s}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def signed_headers(secret: str, body: bytes, timestamp_s: int | None = None) -> dict[str, str]:
    """The two headers a delivery of ``body`` carries."""
    timestamp_s = int(time.time()) if timestamp_s is None else timestamp_s
    return {
        TIMESTAMP_HEADER: str(timestamp_s),
        SIGNATURE_HEADER: signature(secret, timestamp_s, body),
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    now_s: float | None = None,
    tolerance_s: int = TOLERANCE_S,
) -> bool:
    """True if ``body`` was signed with ``secret`` within ``tolerance_s`` of ``now_s``.

    ``headers`` must look names up case-insensitively (as aiohttp's, httpx's, Starlette's and
    requests' header mappings do) or hold them spelled as above.
    """
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    received = headers.get(SIGNATURE_HEADER, "")
    if not timestamp.isascii() or not timestamp.isdigit():
        return False
    now_s = time.time() if now_s is None else now_s
    if abs(now_s - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(received.encode(), signature(secret, int(timestamp), body).encode())
