"""A recovery controller for tests: an aiohttp server on a loopback port that checks each
delivery's signature, keeps what it accepted, can refuse its next deliveries, and can be
stopped and started again on the same port (a controller restart)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from idemproxy.ledger.signature import verify
from tests.support.processes import free_port


@dataclass
class Delivery:
    agent: str
    events: list[dict[str, Any]]
    verified: bool


@dataclass
class Controller:
    secret: str
    port: int = field(default_factory=free_port)
    refuse_next: int = 0  # answer this many deliveries 503
    delay_s: float = 0.0
    accepted: list[Delivery] = field(default_factory=list)
    received: int = 0  # POSTs that arrived, whatever became of them
    refused: int = 0
    forged: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/events", self._receive)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.received += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if not verify(self.secret, request.headers, body):
            self.forged += 1
            return web.json_response({"error": "bad signature"}, status=401)
        if self.refuse_next > 0:
            self.refuse_next -= 1
            self.refused += 1
            return web.json_response({"error": "busy"}, status=503)
        document = orjson.loads(body)
        self.accepted.append(Delivery(document["agent"], document["events"], verified=True))
        return web.json_response({"ok": True})

    def events(self, agent: str) -> list[dict[str, Any]]:
        """Every event the controller accepted for ``agent``, in arrival order (with repeats)."""
        return [event for d in self.accepted if d.agent == agent for event in d.events]

    def event_ids(self, agent: str) -> list[str]:
        """The ids of the agent's accepted events, each once, in first-arrival order."""
        return list(dict.fromkeys(event["event_id"] for event in self.events(agent)))
