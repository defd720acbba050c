"""An agent's MCP client: the official SDK's ``mcp.Client`` over streamable HTTP, its exchanges
recorded on the wire (:mod:`tests.support.mcp_wire`), its tool calls keyed one of two ways.

Run as a process, it makes one keyed tool call and prints the outcome as a JSON line, so a test
can kill it mid-call as a crash would:
``python -m tests.support.mcp_agent URL MODE KEYING BATCH CALL TOOL ARGUMENTS_JSON``
(MODE ``auto`` or ``legacy``, KEYING ``headers`` or ``meta``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import httpx2
import mcp
import orjson
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, RequestParamsMeta

from tests.support.mcp_wire import RecordingTransport

KEYINGS = ("headers", "meta")
PROTOCOL = "2026-07-28"  # the stateless revision, which "auto" speaks to this SDK's servers
CLIENT_INFO = {"name": "idemproxy-tests", "version": "0"}


@dataclass(frozen=True)
class Key:
    """The batch and tool call that make a call's key, sent the way ``keying`` says."""

    batch: str
    call: str
    keying: str = "meta"

    def headers(self) -> dict[str, str]:
        if self.keying != "headers":
            return {}
        return {"Idem-Batch": self.batch, "Idem-Tool-Call": self.call}

    def meta(self) -> RequestParamsMeta | None:
        if self.keying != "meta":
            return None
        # An open map in the SDK (extra keys are its purpose), which mypy reads as closed.
        meta = {"dev.idemproxy/batch": self.batch, "dev.idemproxy/toolCall": self.call}
        return cast(RequestParamsMeta, meta)


@dataclass
class Connection:
    client: mcp.Client
    wire: RecordingTransport


@contextlib.asynccontextmanager
async def connect(
    url: str,
    mode: str,
    headers: dict[str, str] | None = None,
    wire: RecordingTransport | None = None,
) -> AsyncIterator[Connection]:
    """A client session to ``url`` in ``mode``, every request carrying ``headers``, its
    exchanges recorded in ``wire`` (a new one unless given)."""
    wire = wire or RecordingTransport()
    timeout = httpx2.Timeout(30, read=60)
    async with httpx2.AsyncClient(transport=wire, headers=headers or {}, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, mode=mode) as client:
            yield Connection(client, wire)


async def call(
    url: str, mode: str, key: Key, tool: str, arguments: dict[str, Any]
) -> CallToolResult:
    """One keyed call in a session of its own, as an agent restarted from scratch makes it."""
    async with connect(url, mode, key.headers()) as connection:
        return await connection.client.call_tool(tool, arguments, meta=key.meta())


def stateless_call(
    tool: str, arguments: dict[str, Any], request_id: object, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A tools/call as ``mcp.Client`` in "auto" mode puts it, with ``meta`` in its ``_meta``."""
    envelope = {
        **(meta or {}),
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"_meta": envelope, "name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def stateless_headers(tool: str) -> dict[str, str]:
    """The headers "auto" mode sends with a tools/call of ``tool``."""
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }


def outcome(result: CallToolResult) -> dict[str, Any]:
    return {"structured": result.structured_content, "is_error": result.is_error}


async def main(argv: list[str]) -> None:
    url, mode, keying, batch, tool_call, tool, arguments = argv[1:8]
    result = await call(url, mode, Key(batch, tool_call, keying), tool, orjson.loads(arguments))
    print(orjson.dumps(outcome(result)).decode(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
