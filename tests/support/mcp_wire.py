"""What an MCP client's HTTP exchanges carried on the wire, seen from inside the client.

The official SDK matches answers to requests by JSON-RPC id and patches an error answer's id to
its request's, so a test that only looks at what ``mcp.Client`` returns cannot tell whether an
answer came back under the right id. :class:`RecordingTransport` sits under the SDK's
``httpx2`` client and keeps every exchange as it was sent and answered: the request's method,
headers and body, the answer's status, headers and body. A POST's answer is read whole before
the SDK sees it (a POST's stream ends with its answer); a GET's (the session's standing event
stream) is passed on unread, its status and headers kept.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import httpx2
import orjson


@dataclass
class Exchange:
    method: str
    url: str
    request_headers: dict[str, str]  # lower-cased names
    request_body: bytes
    status: int
    headers: dict[str, str]  # the answer's, lower-cased names
    body: bytes  # empty for a GET

    @property
    def request(self) -> Any:
        """The JSON-RPC message the POST carried (None for a bodiless request)."""
        return orjson.loads(self.request_body) if self.request_body else None

    @property
    def answers(self) -> list[Any]:
        """The JSON-RPC messages of the answer: a JSON body, or each SSE event's data."""
        if not self.body:
            return []
        with contextlib.suppress(orjson.JSONDecodeError, UnicodeDecodeError):
            return self._messages()
        return []  # no JSON-RPC at all: the test that reads the answer sees none

    def _messages(self) -> list[Any]:
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            lines = self.body.decode().splitlines()
            return [
                orjson.loads(line[5:])
                for line in lines
                if line.startswith("data:") and line[5:].strip()
            ]
        return [orjson.loads(self.body)]

    @property
    def rpc_method(self) -> str:
        message = self.request
        return message.get("method", "") if isinstance(message, dict) else ""

    @property
    def tool(self) -> str:
        message = self.request
        if self.rpc_method != "tools/call":
            return ""
        return str(message["params"]["name"])

    @property
    def response(self) -> Any:
        """The answer to the request: the message with an id among those it carried."""
        for message in self.answers:
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return message
        return None


@dataclass
class RecordingTransport(httpx2.AsyncBaseTransport):
    inner: httpx2.AsyncBaseTransport = field(default_factory=httpx2.AsyncHTTPTransport)
    exchanges: list[Exchange] = field(default_factory=list)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self.inner.handle_async_request(request)
        headers = {k.lower(): v for k, v in response.headers.items()}
        exchange = Exchange(
            request.method,
            str(request.url),
            _lower(request.headers),
            body,
            response.status_code,
            headers,
            b"",
        )
        self.exchanges.append(exchange)
        if request.method == "GET":
            return response
        try:
            exchange.body = b"".join([chunk async for chunk in response.aiter_raw()])
        finally:
            await response.aclose()
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx2.ByteStream(exchange.body),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def tool_calls(self, tool: str = "") -> list[Exchange]:
        return [
            e
            for e in self.exchanges
            if e.rpc_method == "tools/call" and (not tool or e.tool == tool)
        ]

    def mismatched_ids(self) -> list[tuple[object, object]]:
        """(request id, answer id) of each request answered under an id not its own."""
        return [
            (exchange.request["id"], exchange.response["id"])
            for exchange in self.exchanges
            if isinstance(exchange.request, dict)
            and "id" in exchange.request
            and exchange.response is not None
            and exchange.response.get("id") != exchange.request["id"]
        ]


def _lower(headers: httpx2.Headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}
