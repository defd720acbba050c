"""Upstream bodies that break off: the agent must never take a cut answer for a whole one."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from tests.effects.test_flow import TOOL_CALL
from tests.proxy.conftest import ProxyFactory

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


BIG_BYTES = 8_000_000


async def open_request(port: int, path: str, receive_buffer: int | None = None) -> socket.socket:
    """A raw agent connection that has sent its request and read nothing yet."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    head = "".join(f"{name}: {value}\r\n" for name, value in TOOL_CALL.items())
    request = f"POST {path} HTTP/1.1\r\nHost: x\r\n{head}Content-Length: 2\r\n\r\n{{}}"
    await asyncio.get_running_loop().sock_sendall(sock, request.encode())
    return sock


async def settled_state(store: MemoryStore, timeout_s: float) -> RecordState | None:
    """The state of the one record once it leaves in_flight, or in_flight after the timeout."""
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        records = await store.batch_records("default", TOOL_CALL["Idem-Batch"])
        state = records[0].state if records else None
        if state not in (None, RecordState.IN_FLIGHT):
            return state
        await asyncio.sleep(0.05)
    return state


async def test_an_agent_that_leaves_mid_answer_still_gets_its_effect_completed(
    make_proxy: ProxyFactory,
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)
    assert client.port is not None
    sock = await open_request(client.port, f"/up/big?bytes={BIG_BYTES}", receive_buffer=4096)
    await asyncio.get_running_loop().sock_recv(sock, 4096)  # the head and a little of the body
    await asyncio.sleep(0.3)  # the proxy's writes back up: it waits for the agent to read
    # Gone at once: the connection is reset, as when the agent's process is killed.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()

    assert await settled_state(store, timeout_s=10) is RecordState.COMPLETED
    events = [str(e.type) for e in await store.read_events("default", limit=100)]
    assert "effect.completed" in events


async def test_an_agent_that_stops_reading_does_not_hold_its_effect_in_flight(
    make_proxy: ProxyFactory,
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, agent_write_timeout_s=0.5)
    assert client.port is not None
    sock = await open_request(client.port, f"/up/big?bytes={BIG_BYTES}", receive_buffer=4096)

    # The agent never reads; the proxy stops waiting on it and records the whole answer.
    assert await settled_state(store, timeout_s=10) is RecordState.COMPLETED
    sock.close()
