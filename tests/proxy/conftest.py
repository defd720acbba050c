"""An in-process proxy (memory or any given store) in front of the in-process fake upstream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from idemproxy.config.loader import load_config
from idemproxy.metrics import Metrics
from idemproxy.proxy.app import build_proxy_app
from idemproxy.proxy.state import ProxyState
from idemproxy.server import PROXY_SERVER_SETTINGS, build_state
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from tests.support.upstream import EFFECTS, EffectLog, build_upstream_app


class ProxyTestServer(TestServer):
    """Runs the proxy app with the server settings ``idemproxy serve`` uses."""

    async def _make_runner(self, **kwargs: Any) -> web.AppRunner:
        kwargs.update(PROXY_SERVER_SETTINGS)
        return web.AppRunner(self.app, **kwargs)


ProxyFactory = Callable[..., Awaitable[tuple[TestClient[web.Request, web.Application], ProxyState]]]


@pytest.fixture
async def upstream(aiohttp_server: Any) -> TestServer:
    server: TestServer = await aiohttp_server(build_upstream_app(), auto_decompress=False)
    return server


@pytest.fixture
def effects(upstream: TestServer) -> EffectLog:
    return upstream.app[EFFECTS]


@pytest.fixture
def make_proxy(upstream: TestServer, aiohttp_client: Any) -> ProxyFactory:
    async def make(
        store: Store | None = None, policy: str = "generic", **settings: Any
    ) -> tuple[TestClient[web.Request, web.Application], ProxyState]:
        flags = {"upstreams.up.url": str(upstream.make_url("/api")), "upstreams.up.policy": policy}
        for name, value in settings.items():
            flags[name] = value
        loaded = load_config(environ={}, flags=flags)
        state = build_state(loaded, store or MemoryStore(), Metrics())
        client: TestClient[web.Request, web.Application] = await aiohttp_client(
            ProxyTestServer(build_proxy_app(state))
        )
        return client, state

    return make
