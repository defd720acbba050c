"""Stream an upstream response to the agent as it arrives, keeping a copy for the record."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import ClientResponse, web
from multidict import CIMultiDict


@dataclass(frozen=True, slots=True)
class Relayed:
    body: bytes
    truncated: bool  # the copy stopped at the capture limit; the agent still got every byte
    complete: bool  # the upstream body was read to its end
    client_gone: bool  # the agent disconnected before the end


async def relay(
    request: web.Request,
    upstream: ClientResponse,
    headers: CIMultiDict[str],
    capture_limit: int | None,
) -> tuple[web.StreamResponse, Relayed]:
    """Pass the body through chunk by chunk (SSE events leave as they come).

    With ``capture_limit`` set the upstream is read to its end even if the agent went away, so
    the record holds the whole answer for the agent's retry after it restarts.
    """
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    captured = bytearray()
    truncated = complete = client_gone = False
    try:
        await response.prepare(request)
    except ConnectionResetError:
        client_gone = True
    try:
        async for chunk in upstream.content.iter_any():
            if capture_limit is not None and not truncated:
                room = capture_limit - len(captured)
                truncated = len(chunk) > room
                captured += chunk[:room] if truncated else chunk
            if not client_gone:
                try:
                    await response.write(chunk)
                except ConnectionResetError:
                    client_gone = True
            if client_gone and capture_limit is None:
                break
        complete = not client_gone or capture_limit is not None
    except (aiohttp.ClientError, TimeoutError):
        complete = False
    if not client_gone:
        if complete:
            try:
                await response.write_eof()
            except ConnectionResetError:
                client_gone = True
        elif request.transport is not None:
            # A cut upstream body must not look complete to the agent: drop the connection.
            request.transport.close()
    return response, Relayed(bytes(captured), truncated, complete, client_gone)
