"""Upstream bodies that break off: the agent must never take a cut answer for a whole one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from tests.proxy.conftest import ProxyFactory
from tests.proxy.test_effects import TOOL_CALL

PROMISED_BYTES = 100
SENT = b'{"id": "cut'


@pytest.fixture
async def cutting_upstream() -> AsyncIterator[str]:
    """Answers every request with a head promising 100 bytes, sends 11 and hangs up."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":")[1]))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (PROMISED_BYTES, SENT)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}"


async def test_a_cut_small_body_breaks_the_agents_connection_and_is_recorded_as_cut(
    make_proxy: ProxyFactory, cutting_upstream: str
) -> None:
    client, _ = await make_proxy(**{"upstreams.up.url": cutting_upstream})
    first = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
    assert first.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await first.read()

    repeat = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
    assert repeat.headers["Idem-Outcome"] == "replayed"
    assert repeat.headers["Idem-Body-Truncated"] == "true"
    assert await repeat.read() == SENT


async def test_a_cut_body_on_a_safe_route_breaks_the_agents_connection(
    make_proxy: ProxyFactory, cutting_upstream: str
) -> None:
    client, _ = await make_proxy(**{"upstreams.up.url": cutting_upstream})
    response = await client.get("/up/messages")
    assert response.status == 200
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()
