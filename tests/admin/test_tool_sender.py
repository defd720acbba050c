"""A compensation that is an MCP tool call is sent as an MCP client sends one."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer
from yarl import URL

from idemproxy.admin.sender import ProxySender
from idemproxy.admin.tool_sender import tool_answer
from idemproxy.effects.seal import CompensationSeal
from idemproxy.ledger.compensator import Outgoing
from idemproxy.ledger.tool_compensation import COMPENSATION_ID, TOOLS_CALL_HEADERS

SEEN = web.AppKey("seen", list)


def session_server(*, sessions: bool, result: dict[str, Any]) -> web.Application:
    """An MCP endpoint at /tools/mcp that, with ``sessions``, refuses a call outside one."""
    seen: list[tuple[str, str, str | None]] = []

    async def endpoint(request: web.Request) -> web.Response:
        session = request.headers.get("Mcp-Session-Id")
        if request.method == "DELETE":
            seen.append(("DELETE", "", session))
            return web.Response()
        message = orjson.loads(await request.read())
        seen.append(("POST", message.get("method", ""), session))
        if message.get("method") == "initialize":
            headers = {"Mcp-Session-Id": "s-1"} if sessions else {}
            answer = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"protocolVersion": "2025-06-18"},
            }
            return web.json_response(answer, headers=headers)
        if message.get("method") == "notifications/initialized":
            return web.Response(status=202)
        if sessions and session != "s-1":
            return web.json_response(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600}}, status=400
            )
        assert request.headers["Mcp-Protocol-Version"] == "2025-06-18"
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = web.Application()
    app[SEEN] = seen
    app.router.add_route("*", "/tools/mcp", endpoint)
    return app


CALL = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": COMPENSATION_ID,
        "method": "tools/call",
        "params": {"name": "delete_message"},
    }
)
OUTGOING = Outgoing(
    "tools", "POST", "/mcp", CALL, (("Idem-Compensates", "bot/k"), *TOOLS_CALL_HEADERS), mcp=True
)


async def send(aiohttp_server: Any, app: web.Application) -> tuple[int, bool, str]:
    server: TestServer = await aiohttp_server(app)
    sender = ProxySender(
        str(URL(str(server.make_url("/")))).rstrip("/"), CompensationSeal.generate()
    )
    try:
        sent = await sender.send(OUTGOING, {"Authorization": "Bearer op"})
    finally:
        await sender.close()
    return sent.status, sent.answer_failed, sent.detail


async def test_a_server_keeping_sessions_gets_one_for_the_call(aiohttp_server: Any) -> None:
    app = session_server(sessions=True, result={"content": []})
    assert await send(aiohttp_server, app) == (200, False, "")
    assert app[SEEN] == [
        ("POST", "initialize", None),
        ("POST", "notifications/initialized", "s-1"),
        ("POST", "tools/call", "s-1"),
        ("DELETE", "", "s-1"),
    ]


async def test_a_stateless_server_gets_the_call_alone(aiohttp_server: Any) -> None:
    app = session_server(sessions=False, result={"content": []})
    assert (await send(aiohttp_server, app))[:2] == (200, False)
    assert [method for _, method, _ in app[SEEN]] == ["initialize", "tools/call"]


async def test_a_tool_error_is_a_failed_compensation(aiohttp_server: Any) -> None:
    failed = {"isError": True, "content": [{"type": "text", "text": "no such message"}]}
    app = session_server(sessions=False, result=failed)
    assert await send(aiohttp_server, app) == (200, True, "no such message")


def test_an_answer_without_the_call_s_answer_is_a_failure() -> None:
    sent = tool_answer(200, "forwarded", "text/event-stream", b": nothing\n\n")
    assert sent.answer_failed
    error = {
        "jsonrpc": "2.0",
        "id": COMPENSATION_ID,
        "error": {"code": -32030, "message": "in review"},
    }
    refused = tool_answer(409, "outcome-unknown", "application/json", orjson.dumps(error))
    assert (refused.status, refused.detail, refused.answer_failed) == (409, "in review", True)
