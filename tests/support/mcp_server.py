"""A remote MCP server built with the official Python SDK, counting each tool execution.

Run as its own process by end-to-end tests, ``python -m tests.support.mcp_server PORT MODE``,
with MODE ``session`` (the session revision: ``Mcp-Session-Id``, answers as SSE streams) or
``stateless`` (every request on its own, JSON answers). The MCP endpoint is ``/mcp``; the
counts of executions are read back from ``GET /_executions`` (JSON ``{tool: count}``), and the
texts sent from ``GET /_sent`` (JSON ``{text: [execution number, ...]}``), plain routes of the
same app, so a test in another process can tell an executed call from a replay.

Tools:
- ``send_message(text, sent_at="")``: the side effect; answers ``{"id": n, "text": text}``,
  n its count.
- ``read_count()``: read-only (``readOnlyHint``); answers how many messages were sent.
- ``slow_send(text, ms)``: counted first, answered ``ms`` milliseconds later, so a test can
  cut the stream, or pile concurrent duplicates onto one execution.
- ``fail_send(text)``: counted, then raises: the SDK answers ``isError: true``.
- ``confirm_send(text)``: (stateless revision) answers ``input_required`` first; the retry that
  carries its ``requestState`` is counted and answered.
- ``delete_message(id)``: undoes a ``send_message`` (its compensation); the ids deleted are
  read back from ``GET /_deleted``.
- ``refuse_send(text, code)``: counted, then answers the JSON-RPC error ``code`` (an
  ``MCPError``), so a test can tell an error that frees a call's key from one that is recorded.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import InputRequiredResult, ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

MODES = ("session", "stateless")
EXECUTIONS: Counter[str] = Counter()
# Each text a sending tool sent, with the number of each execution that sent it: a text sent
# twice is an effect that happened twice.
SENT: dict[str, list[int]] = {}
DELETED: list[int] = []


def build_server() -> MCPServer:
    server = MCPServer("idemproxy-test-tools")

    @server.tool()
    def send_message(text: str, sent_at: str = "") -> dict[str, Any]:
        """Send a message: a side effect, counted each time it runs (``sent_at`` is what an
        agent stamps anew on each attempt)."""
        EXECUTIONS["send_message"] += 1
        SENT.setdefault(text, []).append(EXECUTIONS["send_message"])
        return {"id": EXECUTIONS["send_message"], "text": text}

    @server.tool()
    def delete_message(id: int) -> dict[str, Any]:
        """Delete a message sent: the compensation of send_message."""
        EXECUTIONS["delete_message"] += 1
        DELETED.append(id)
        return {"deleted": id}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_count() -> int:
        """How many messages were sent: reads, changes nothing."""
        EXECUTIONS["read_count"] += 1
        return EXECUTIONS["send_message"]

    @server.tool()
    async def slow_send(text: str, ms: int) -> dict[str, Any]:
        """Send a message, then take ``ms`` milliseconds to answer."""
        EXECUTIONS["slow_send"] += 1
        number = EXECUTIONS["slow_send"]
        SENT.setdefault(text, []).append(number)
        await asyncio.sleep(ms / 1000)
        return {"id": number, "text": text}

    @server.tool()
    def fail_send(text: str) -> dict[str, Any]:
        """Try to send a message and fail after the attempt: an error result, not a crash."""
        EXECUTIONS["fail_send"] += 1
        raise ToolError(f"the channel refused {text!r}")

    @server.tool()
    def refuse_send(text: str, code: int) -> dict[str, Any]:
        """Try to send a message and answer a JSON-RPC error instead of a result."""
        EXECUTIONS["refuse_send"] += 1
        raise MCPError(code, f"refused {text!r}")

    @server.tool(structured_output=False)
    def confirm_send(text: str, ctx: Context) -> dict[str, Any] | InputRequiredResult:
        """Send a message once the client confirmed: the first round only asks for more input
        (the stateless revision's multi-round call), the round that carries the state sends."""
        if ctx.request_state is None:
            EXECUTIONS["confirm_asked"] += 1
            return InputRequiredResult(request_state="confirm")
        EXECUTIONS["confirm_send"] += 1
        return {"id": EXECUTIONS["confirm_send"], "text": text}

    server.custom_route("/_executions", methods=["GET"])(executions)
    server.custom_route("/_sent", methods=["GET"])(sent)
    server.custom_route("/_deleted", methods=["GET"])(deleted)

    return server


async def executions(request: Request) -> Response:
    """The counts, for a test in another process."""
    return JSONResponse(dict(EXECUTIONS))


async def deleted(request: Request) -> Response:
    """The ids delete_message deleted, in order."""
    return JSONResponse(DELETED)


async def sent(request: Request) -> Response:
    """What each text's executions were numbered, for a test in another process."""
    return JSONResponse(SENT)


def build_app(mode: str) -> Starlette:
    """The Starlette app of ``mode``: the SDK's two ways of serving streamable HTTP."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    server = build_server()
    if mode == "session":
        return server.streamable_http_app(stateless_http=False)
    return server.streamable_http_app(stateless_http=True, json_response=True)


def main(argv: list[str]) -> None:
    port, mode = int(argv[1]), argv[2]
    uvicorn.run(build_app(mode), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv)
