"""The admin app in process, over a store the test fills, with or without a token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.admin.app import build_admin_app
from idemproxy.config.loader import load_config
from idemproxy.metrics import Metrics
from idemproxy.server import build_state
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store

TOKEN = "admin-token-0123456789"

AdminClient = TestClient[web.Request, web.Application]
AdminFactory = Callable[..., Awaitable[AdminClient]]


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def make_admin(aiohttp_client: Any, store: Store) -> AdminFactory:
    async def make(**settings: Any) -> AdminClient:
        loaded = load_config(environ={}, flags=settings)
        client: AdminClient = await aiohttp_client(
            build_admin_app(build_state(loaded, store, Metrics()))
        )
        return client

    return make


@pytest.fixture
async def admin(make_admin: AdminFactory) -> AdminClient:
    """An admin API guarded by :data:`TOKEN`."""
    return await make_admin(admin_token=TOKEN)


AUTH = {"Authorization": f"Bearer {TOKEN}"}
