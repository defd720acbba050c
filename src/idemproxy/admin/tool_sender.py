"""Sending a compensation that is an MCP tool call (ledger/tool_compensation.py) the way an MCP
client would: a server that keeps sessions gets ``initialize`` and ``notifications/initialized``
first and a ``DELETE`` after, all passed through the proxy unrecorded; a stateless one just the
call. The answer is read for a tool's error, which comes with status 200."""

from __future__ import annotations

from collections.abc import Mapping

import orjson
from aiohttp import ClientSession
from yarl import URL

from idemproxy import __version__, jsonrpc
from idemproxy.ledger.compensator import Sent
from idemproxy.ledger.tool_compensation import COMPENSATION_ID, TOOLS_CALL_HEADERS

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "Mcp-Protocol-Version"
# The last revision with the initialize handshake, which every server since 2025 still takes.
PROTOCOL_VERSION = "2025-11-25"
DETAIL_CHARS = 300


class McpSession:
    """The session (if the server keeps one) a compensation's tools/call is sent in."""

    def __init__(self, session: ClientSession, url: URL, credentials: Mapping[str, str]) -> None:
        self._session = session
        self._url = url
        self._headers = {**credentials, **dict(TOOLS_CALL_HEADERS)}
        self.headers: dict[str, str] = {}  # what the call carries: the session and the version

    async def open(self) -> Sent | None:
        """Initialize; a :class:`Sent` when the server refused, else None."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "idemproxy-compensation", "version": __version__},
        }
        message = {"jsonrpc": "2.0", "id": "idemproxy-initialize", "method": "initialize"}
        body = orjson.dumps({**message, "params": params})
        async with self._session.post(self._url, data=body, headers=self._headers) as answer:
            read = await answer.read()
            if answer.status >= 400:
                return Sent(answer.status, "mcp-initialize-refused", _start(read))
            found = jsonrpc.answer_to(read, answer.headers.get("Content-Type", ""), message["id"])
            session_id = answer.headers.get(SESSION_HEADER)
        version = jsonrpc.result_of(found or {}).get("protocolVersion")
        self.headers[VERSION_HEADER] = version if isinstance(version, str) else PROTOCOL_VERSION
        if session_id is not None:
            self.headers[SESSION_HEADER] = session_id
            initialized = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
            headers = {**self._headers, **self.headers}
            async with self._session.post(self._url, data=initialized, headers=headers):
                pass
        return None

    async def close(self) -> None:
        if SESSION_HEADER in self.headers:
            headers = {**self._headers, **self.headers}
            async with self._session.delete(self._url, headers=headers):
                pass


def tool_answer(status: int, outcome: str, content_type: str, body: bytes) -> Sent:
    """What the answer to a compensation's tools/call says: done, or the tool's error."""
    answer = jsonrpc.answer_to(body, content_type, COMPENSATION_ID)
    if answer is None:
        return Sent(status, outcome, _start(body), answer_failed=status < 400)
    if not jsonrpc.failed(answer):
        return Sent(status, outcome)
    return Sent(status, outcome, jsonrpc.error_text(answer)[:DETAIL_CHARS], answer_failed=True)


def _start(body: bytes) -> str:
    return body[:DETAIL_CHARS].decode("utf-8", "replace")
