"""The agent helper puts the batch and tool call on requests of every HTTP library we document."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import httpx
import httpx2
import openai
import pytest
import requests
from aiohttp import web
from aiohttp.test_utils import TestServer

from idemproxy import agent

SEEN = web.AppKey("seen", list[dict[str, str]])


async def record_headers(request: web.Request) -> web.Response:
    idem = {k.title(): v for k, v in request.headers.items() if k.lower().startswith("idem-")}
    request.app[SEEN].append(idem)
    if request.path.endswith("/chat/completions"):
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "hi"},
                    }
                ],
            }
        )
    return web.json_response({"ok": True})


@pytest.fixture
async def server(aiohttp_server: Any) -> TestServer:
    app = web.Application()
    app[SEEN] = []
    app.router.add_route("*", "/{tail:.*}", record_headers)
    served: TestServer = await aiohttp_server(app)
    return served


def seen(server: TestServer) -> list[dict[str, str]]:
    return server.app[SEEN]


def test_headers_follow_the_nesting_and_leave_with_it() -> None:
    assert agent.headers() == {}
    with agent.batch("b-7", agent="support-bot"):
        assert agent.headers() == {"Idem-Batch": "b-7", "Idem-Agent": "support-bot"}
        with agent.tool_call("call-1", action="discord_reply"), agent.step("reply"):
            assert agent.headers() == {
                "Idem-Batch": "b-7",
                "Idem-Agent": "support-bot",
                "Idem-Tool-Call": "call-1",
                "Idem-Action": "discord_reply",
                "Idem-Step": "reply",
            }
        assert agent.headers() == {"Idem-Batch": "b-7", "Idem-Agent": "support-bot"}
    assert agent.headers() == {}


def test_a_tool_call_outside_a_batch_or_a_bad_id_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"agent\.batch"):
        agent.tool_call("call-1")
    with pytest.raises(ValueError, match="visible ASCII"), agent.batch("has space"):
        pass


def test_explicit_headers_win() -> None:
    target = {"Idem-Step": "mine"}
    with agent.batch("b"), agent.tool_call("c", step="helper's"):
        agent.apply(target)
    assert target == {"Idem-Step": "mine", "Idem-Batch": "b", "Idem-Tool-Call": "c"}


async def test_concurrent_tasks_keep_their_own_tool_call(server: TestServer) -> None:
    async with aiohttp.ClientSession(middlewares=(agent.aiohttp_middleware,)) as session:

        async def call(call_id: str) -> None:
            with agent.tool_call(call_id):
                await asyncio.sleep(0.01)
                async with session.post(server.make_url("/x")) as response:
                    assert response.status == 200

        with agent.batch("b-1"):
            await asyncio.gather(*(call(f"call-{i}") for i in range(5)))
        async with session.post(server.make_url("/outside")) as response:
            assert response.status == 200
    calls = sorted(headers.get("Idem-Tool-Call", "-") for headers in seen(server))
    assert calls == ["-", "call-0", "call-1", "call-2", "call-3", "call-4"]


async def test_httpx_clients_carry_the_headers(server: TestServer) -> None:
    hooks: dict[str, list[Any]] = {"request": [agent.httpx_async_hook]}
    async with httpx.AsyncClient(event_hooks=hooks) as client:
        with agent.batch("b-2"), agent.tool_call("call-1"):
            await client.post(str(server.make_url("/async")), json={})

    def sync_call() -> None:
        with (
            httpx.Client(event_hooks={"request": [agent.httpx_hook]}) as client,
            agent.batch("b-2"),
            agent.tool_call("call-2"),
        ):
            client.post(str(server.make_url("/sync")), json={})

    await asyncio.to_thread(sync_call)
    assert seen(server) == [
        {"Idem-Batch": "b-2", "Idem-Tool-Call": "call-1"},
        {"Idem-Batch": "b-2", "Idem-Tool-Call": "call-2"},
    ]


async def test_requests_carries_the_headers_after_its_own_auth(server: TestServer) -> None:
    def sync_call() -> None:
        with requests.Session() as session:
            session.auth = agent.RequestsAuth(requests.auth.HTTPBasicAuth("user", "pass"))
            with agent.batch("b-3"), agent.tool_call("call-1"):
                response = session.post(str(server.make_url("/r")), json={})
            assert str(response.request.headers["Authorization"]).startswith("Basic ")

    await asyncio.to_thread(sync_call)
    assert seen(server) == [{"Idem-Batch": "b-3", "Idem-Tool-Call": "call-1"}]


async def test_the_openai_sdk_carries_the_headers(server: TestServer) -> None:
    # openai 3 is built on httpx2, httpx's successor, whose event hooks work the same way.
    hooks: dict[str, list[Any]] = {"request": [agent.httpx_async_hook]}
    async with httpx2.AsyncClient(event_hooks=hooks) as http_client:
        client = openai.AsyncOpenAI(
            api_key="sk-test", base_url=str(server.make_url("/openai/v1")), http_client=http_client
        )
        with agent.batch("b-4"), agent.tool_call("call-1"):
            hooked = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello"}]
            )
            per_call = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "again"}],
                extra_headers={**agent.headers(), "Idem-Step": "second"},
            )
    assert hooked.choices[0].message.content == per_call.choices[0].message.content == "hi"
    assert seen(server) == [
        {"Idem-Batch": "b-4", "Idem-Tool-Call": "call-1"},
        {"Idem-Batch": "b-4", "Idem-Tool-Call": "call-1", "Idem-Step": "second"},
    ]


def test_an_mcp_call_carries_the_context_in_its_meta() -> None:
    assert agent.mcp_meta() == {}
    with agent.batch("b-1"), agent.tool_call("call-1", step="s"):
        assert agent.mcp_meta() == {
            "dev.idemproxy/batch": "b-1",
            "dev.idemproxy/toolCall": "call-1",
            "dev.idemproxy/step": "s",
        }
