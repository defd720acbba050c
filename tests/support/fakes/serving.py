"""Run aiohttp apps on loopback in a background thread, so synchronous SDKs can call them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import web

T = TypeVar("T")


class BackgroundServers:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runners: list[web.AppRunner] = []

    def start(self) -> None:
        self._thread.start()

    def run(self, coroutine: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await coroutine

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(timeout=30)

    def serve(self, app: web.Application) -> str:
        """Start ``app`` on a free loopback port; its base URL."""

        async def start() -> str:
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._runners.append(runner)
            server = site._server
            assert isinstance(server, asyncio.base_events.Server)
            port = server.sockets[0].getsockname()[1]
            return f"http://127.0.0.1:{port}"

        return self.run(start())

    def stop(self) -> None:
        async def cleanup() -> None:
            for runner in reversed(self._runners):
                await runner.cleanup()

        self.run(cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
