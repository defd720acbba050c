"""A token in the path reaches the upstream, and nothing the proxy keeps or says holds it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

TOKEN_A = "123456789:AAHsecretTokenOfBotA_0123456789abcd"
TOKEN_B = "987654321:AAHsecretTokenOfBotB_0123456789abcd"
CALL = {"Idem-Batch": "b1", "Idem-Tool-Call": "c1", "Content-Type": "application/json"}


def dumped(store: MemoryStore) -> str:
    return repr(store._tables.records) + repr(store._tables.events)


def key_of(idem_key: str) -> RecordKey:
    agent, _, effect_id = idem_key.partition("/")
    return RecordKey(agent, effect_id)


async def test_a_bot_token_is_forwarded_but_the_record_shows_its_placeholder(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)

    sent = await client.post(f"/up/bot{TOKEN_A}/messages", data=b'{"text":"hi"}', headers=CALL)
    again = await client.post(f"/up/bot{TOKEN_A}/messages", data=b'{"text":"hi"}', headers=CALL)

    assert (sent.status, again.headers["Idem-Outcome"]) == (200, "replayed")
    assert [effect.path for effect in effects.effects] == [f"/api/bot{TOKEN_A}/messages"]
    record = await store.get(key_of(sent.headers["Idem-Key"]))
    assert record is not None
    assert record.meta.path == "/bot{token}/messages"
    assert record.meta.action == "bot_api"
    assert TOKEN_A not in dumped(store)


async def test_two_tokens_are_two_effects_of_one_tool_call(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)

    first = await client.post(f"/up/bot{TOKEN_A}/messages", data=b'{"text":"hi"}', headers=CALL)
    second = await client.post(f"/up/bot{TOKEN_B}/messages", data=b'{"text":"hi"}', headers=CALL)

    assert [first.headers["Idem-Outcome"], second.headers["Idem-Outcome"]] == ["forwarded"] * 2
    assert first.headers["Idem-Key"] != second.headers["Idem-Key"]
    assert effects.count("/messages") == 2
    for token in (TOKEN_A, TOKEN_B):
        assert token not in dumped(store)


@pytest.fixture
async def webhooks(aiohttp_server: Any) -> tuple[str, list[str]]:
    """A Discord-like upstream that posts a message for every webhook it is sent; the paths it
    received, as they came."""
    received: list[str] = []

    async def execute(request: web.Request) -> web.Response:
        received.append(request.raw_path)
        return web.json_response({"id": str(len(received)), "channel_id": "81"})

    app = web.Application()
    app.router.add_post("/api/v10/webhooks/{webhook_id}/{token}", execute)
    server = await aiohttp_server(app)
    return str(server.make_url("/api")), received


async def test_a_webhook_token_is_shown_as_a_placeholder_when_the_tool_call_already_acted(
    make_proxy: ProxyFactory, webhooks: tuple[str, list[str]]
) -> None:
    url, received = webhooks
    store = MemoryStore()
    client, _ = await make_proxy(store=store, policy="discord", **{"upstreams.up.url": url})

    # One message per tool call on execute_webhook: another token is another request.
    first = await client.post(f"/up/v10/webhooks/5/{TOKEN_A}", json={"n": 1}, headers=CALL)
    other = await client.post(f"/up/v10/webhooks/5/{TOKEN_B}", json={"n": 1}, headers=CALL)

    assert received == [f"/api/v10/webhooks/5/{TOKEN_A}"]
    assert first.headers["Idem-Outcome"] == "forwarded"
    assert (other.status, other.headers["Idem-Outcome"]) == (409, "tool-call-already-acted")
    problem = orjson.loads(await other.read())
    assert "POST /v10/webhooks/5/{token}" in problem["detail"]
    assert TOKEN_A not in dumped(store)


@pytest.fixture
async def garbage_upstream() -> AsyncIterator[str]:
    """An upstream that answers every request with bytes that are not HTTP."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"garbage, not HTTP\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/api"
    server.close()
    await server.wait_closed()


async def test_a_failure_reason_never_carries_the_url_with_its_token(
    make_proxy: ProxyFactory, garbage_upstream: str
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **{"upstreams.up.url": garbage_upstream})

    answer = await client.post(f"/up/bot{TOKEN_A}/messages", data=b"{}", headers=CALL)

    assert answer.headers["Idem-Outcome"] == "upstream-disconnected"
    record = await store.get(key_of(answer.headers["Idem-Key"]))
    assert record is not None
    assert record.state is RecordState.UNKNOWN
    assert "Bad status line" in record.reason
    assert TOKEN_A not in record.reason
    assert "%3A" not in record.reason  # nor the token as the URL encodes it
    assert TOKEN_A not in dumped(store)
