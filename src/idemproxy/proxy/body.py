"""Reading an effect's request body: whole, within the route's limit, its content coding undone."""

from __future__ import annotations

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from idemproxy.encodings import UndecodableBody, decoded
from idemproxy.errors import ProblemCode, RequestRefused


async def read_body(request: web.Request, limit_bytes: int) -> bytes:
    """The whole request body, refused as soon as it is known to exceed the route's limit.

    A body cut short (the client left, or its chunked framing broke) is refused as well:
    nothing has been claimed or sent yet, so an incomplete request never becomes an effect.
    """
    try:
        return await _read_within(request, limit_bytes)
    except (ConnectionResetError, HttpProcessingError) as exc:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            "the request body ended before it was complete; nothing was sent: resend it whole",
        ) from exc


async def _read_within(request: web.Request, limit_bytes: int) -> bytes:
    length = request.content_length
    if length is not None:
        if length > limit_bytes:
            raise body_too_large(limit_bytes)
        return await request.read()  # the parser stops at Content-Length
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > limit_bytes:
            raise body_too_large(limit_bytes)
    return bytes(body)


def decoded_body(request: web.Request, body: bytes, limit_bytes: int) -> bytes:
    """The request body with its content coding undone, within the route's limit.

    An effect's identity is its content: the same JSON gzipped a second later (gzip stores a
    timestamp) is the same effect. The decoded body is also what is forwarded, so what the
    upstream gets is what was fingerprinted and what an adapter rewrote.
    """
    coding = request.headers.get("Content-Encoding", "")
    if not coding:
        return body
    try:
        return decoded(body, coding, limit_bytes)
    except UndecodableBody as exc:
        if exc.too_large:
            raise body_too_large(limit_bytes, when_decoded=True) from exc
        if exc.unsupported:
            raise RequestRefused(
                ProblemCode.UNSUPPORTED_CONTENT_ENCODING, f"{exc}; nothing was sent"
            ) from exc
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"the request says Content-Encoding: {coding} but {exc}; nothing was sent: send the"
            " body encoded as it says, or uncompressed without Content-Encoding",
        ) from exc


def body_too_large(limit_bytes: int, *, when_decoded: bool = False) -> RequestRefused:
    what = "decodes to more than" if when_decoded else "exceeds"
    return RequestRefused(
        ProblemCode.BODY_TOO_LARGE,
        f"the request body {what} this route's limit of {limit_bytes} bytes, so nothing was"
        " sent; send less, or raise max_body_bytes in the route's policy",
    )
