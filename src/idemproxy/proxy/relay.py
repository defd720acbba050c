"""Stream an upstream response to the agent as it arrives, keeping a copy for the record."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import ClientResponse, web
from multidict import CIMultiDict

# An answer this small whose length is known is read whole, then sent with its head in one
# write: one system call where streaming takes three, and no SSE or large body waits for it.
WHOLE_BODY_BYTES = 64 * 1024
_BODILESS_STATUSES = frozenset({204, 304})


@dataclass(frozen=True, slots=True)
class Relayed:
    body: bytes
    truncated: bool  # the copy stopped at the capture limit; the agent still got every byte
    complete: bool  # the upstream body was read to its end
    client_gone: bool  # the agent disconnected before the end


# Writes the outcome of what was relayed; awaited before the agent can see the answer's end.
Recorder = Callable[[Relayed], Awaitable[None]]


async def relay(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    capture_limit: int | None,
    record: Recorder | None = None,
    write_timeout_s: float | None = None,
) -> tuple[web.StreamResponse, Relayed]:
    """Pass the body through chunk by chunk (SSE events leave as they come).

    With ``capture_limit`` set the upstream is read to its end even if the agent went away, so
    the record holds the whole answer for the agent's retry after it restarts. ``record`` runs
    before the agent has the whole answer: before a body read whole is sent, and before a
    stream's end. So an agent that has its answer finds the outcome written: a crash just after
    cannot leave it unknown, and a repeat sent at once is a replay. A write the agent does not
    take within ``write_timeout_s`` counts as the agent gone.
    """
    length = upstream.content_length
    if (
        length is not None
        and length <= WHOLE_BODY_BYTES
        and request.method != "HEAD"
        and upstream.status not in _BODILESS_STATUSES
    ):
        body, complete = await _read_whole(upstream)
        captured, truncated = _capture(body, capture_limit)
        if record is not None:
            await record(Relayed(captured, truncated, complete, client_gone=False))
        response, client_gone = await _send_read(
            request, upstream, headers, body, complete, write_timeout_s
        )
        return response, Relayed(captured, truncated, complete, client_gone)
    return await _stream(request, upstream, headers, capture_limit, record, write_timeout_s)


async def _read_whole(upstream: ClientResponse) -> tuple[bytes, bool]:
    """The body, and whether it arrived to its end; a cut body is kept as far as it came.

    readany() itself, not iter_any(): the iterator adds a coroutine per chunk and an exception
    at the end, and a small answer is mostly one chunk already buffered.
    """
    chunks: list[bytes] = []
    try:
        while chunk := await upstream.content.readany():
            chunks.append(chunk)
    except (aiohttp.ClientError, TimeoutError):
        return b"".join(chunks), False
    return b"".join(chunks), True


async def _to_agent(
    request: web.Request, write: Awaitable[object], timeout_s: float | None
) -> bool:
    """One write to the agent; False when the agent is gone, or took longer than ``timeout_s``
    to take the bytes (its connection is then dropped: an agent that stops reading must not
    hold the answer, and the effect's record, for ever)."""
    try:
        await asyncio.wait_for(write, timeout_s)
    except ConnectionError:  # reset, or lost while aiohttp waited for the buffer to drain
        return False
    except TimeoutError:
        if request.transport is not None:
            request.transport.close()
        return False
    return True


async def _send_read(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    body: bytes,
    complete: bool,
    write_timeout_s: float | None,
) -> tuple[web.StreamResponse, bool]:
    """Send a body read whole with its head in one write; a body cut short is passed on and
    then the connection dropped, so that it cannot look complete to the agent."""
    response: web.StreamResponse
    if complete:
        response = web.Response(
            status=upstream.status, reason=upstream.reason, headers=headers, body=body
        )
    else:
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=headers
        )
    client_gone = not await _to_agent(request, response.prepare(request), write_timeout_s)
    if not client_gone:
        last = response.write_eof() if complete else response.write(body)
        client_gone = not await _to_agent(request, last, write_timeout_s)
    if not complete and request.transport is not None:
        request.transport.close()
    return response, client_gone


def _capture(body: bytes, capture_limit: int | None) -> tuple[bytes, bool]:
    if capture_limit is None:
        return b"", False
    return body[:capture_limit], len(body) > capture_limit


async def _stream(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    capture_limit: int | None,
    record: Recorder | None,
    write_timeout_s: float | None,
) -> tuple[web.StreamResponse, Relayed]:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    captured = bytearray()
    truncated = complete = False
    client_gone = not await _to_agent(request, response.prepare(request), write_timeout_s)
    try:
        async for chunk in upstream.content.iter_any():
            if capture_limit is not None and not truncated:
                room = capture_limit - len(captured)
                truncated = len(chunk) > room
                captured += chunk[:room] if truncated else chunk
            if not client_gone:
                sent = await _to_agent(request, response.write(chunk), write_timeout_s)
                client_gone = not sent
            if client_gone and capture_limit is None:
                break
        complete = not client_gone or capture_limit is not None
    except (aiohttp.ClientError, TimeoutError):
        complete = False
    if record is not None:
        await record(Relayed(bytes(captured), truncated, complete, client_gone))
    if not client_gone:
        if complete:
            client_gone = not await _to_agent(request, response.write_eof(), write_timeout_s)
        elif request.transport is not None:
            # A cut upstream body must not look complete to the agent: drop the connection.
            request.transport.close()
    return response, Relayed(bytes(captured), truncated, complete, client_gone)
