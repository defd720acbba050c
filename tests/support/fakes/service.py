"""What every fake service shares: a count of the effects it applied, and planned faults.

A test plans a fault for the next call of one operation (``create``, ``message``, ...); the
fake then fails that call before or after applying the effect, with a status or by cutting the
connection, the way real upstreams fail.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson
from aiohttp import web


class Fault(StrEnum):
    FAIL_BEFORE = "fail_before"  # answer an error status; nothing applied
    FAIL_AFTER = "fail_after"  # apply, then answer an error status
    DROP_BEFORE = "drop_before"  # cut the connection; nothing applied
    DROP_AFTER = "drop_after"  # apply, then cut the connection
    SLOW = "slow"  # wait delay_s, then apply and answer as usual


@dataclass(frozen=True)
class Planned:
    fault: Fault
    status: int = 500
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    """One request as the fake received it."""

    method: str
    path_qs: str
    headers: dict[str, str]
    body: bytes


class Service:
    """State shared between the fake's event loop thread and the test thread."""

    def __init__(self) -> None:
        self.effects: list[dict[str, Any]] = []
        self.seen: list[Seen] = []
        self._planned: dict[str, list[Planned]] = {}
        self._lock = threading.Lock()

    def plan(self, operation: str, *faults: Planned) -> None:
        with self._lock:
            self._planned.setdefault(operation, []).extend(faults)

    def take(self, operation: str) -> Planned | None:
        with self._lock:
            queue = self._planned.get(operation)
            return queue.pop(0) if queue else None

    def seen_on(self, path_part: str) -> list[Seen]:
        """Requests whose path or query holds ``path_part``."""
        return [seen for seen in self.seen if path_part in seen.path_qs]

    def sent_with(self, fragment: str) -> list[Seen]:
        """Requests whose body holds ``fragment``."""
        return [seen for seen in self.seen if fragment.encode() in seen.body]

    async def record(self, request: web.Request) -> bytes:
        body = await request.read()
        self.seen.append(Seen(request.method, request.path_qs, dict(request.headers), body))
        return body


async def cut(request: web.Request) -> web.Response:
    """Close the connection without an answer: the client cannot tell what happened."""
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(0.05)
    return web.Response()


async def perform(
    request: web.Request,
    service: Service,
    operation: str,
    apply: Callable[[], web.Response],
) -> web.Response:
    """Run ``apply`` (which records the effect) under the fault planned for ``operation``."""
    planned = service.take(operation)
    if planned is None:
        return apply()
    if planned.fault is Fault.FAIL_BEFORE:
        return json_answer(planned.body, planned.status, planned.headers)
    if planned.fault is Fault.DROP_BEFORE:
        return await cut(request)
    if planned.fault is Fault.SLOW:
        await asyncio.sleep(planned.delay_s)
        return apply()
    apply()
    if planned.fault is Fault.FAIL_AFTER:
        return json_answer(planned.body, planned.status, planned.headers)
    return await cut(request)


def form_parts(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's parts by name: (filename, content), as a server reads it."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.message_from_bytes(head + body, policy=email.policy.HTTP)
    parts: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        content = part.get_payload(decode=True)
        assert isinstance(name, str)
        assert isinstance(content, bytes)
        parts[name] = (part.get_filename(), content)
    return parts


def json_answer(
    document: object, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """JSON with the bare ``application/json`` type real APIs send (discord.py insists on it)."""
    return web.Response(
        status=status, body=orjson.dumps(document), content_type="application/json", headers=headers
    )


@web.middleware
async def gzip_answers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Answer gzipped to a client that accepts gzip, as most real APIs do."""
    response = await handler(request)
    accepts = request.headers.get("Accept-Encoding", "").lower()
    if "gzip" in accepts and isinstance(response, web.Response) and response.body:
        response.enable_compression(web.ContentCoding.gzip)
    return response


def fake_app(*, gzip: bool) -> web.Application:
    """The application a fake is served by; ``gzip`` compresses its answers."""
    return web.Application(middlewares=[gzip_answers] if gzip else [])
