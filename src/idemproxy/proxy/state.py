"""What one serving process shares between its proxy and admin listeners, and the app keys."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web

from idemproxy.config.settings import ProxyConfig
from idemproxy.effects.attempts import Attempts
from idemproxy.effects.flow import EffectFlow
from idemproxy.effects.seal import CompensationSeal
from idemproxy.metrics import Metrics
from idemproxy.proxy.upstreams import Upstream
from idemproxy.store.protocols import Store
from idemproxy.storeguard import StoreGuard


@dataclass
class ProxyState:
    """The serving process's state, whole once built: what the proxy app opens as it starts
    (the client session, the flow) it publishes under its own app keys."""

    config: ProxyConfig
    upstreams: dict[str, Upstream]
    store: Store
    metrics: Metrics
    attempts: Attempts
    guard: StoreGuard  # whether the store keeps records: effects wait on its verdict
    # Proves a compensation is the admin API's own; one per serving process tree, shared by
    # the proxy and admin listeners of every worker.
    seal: CompensationSeal = field(default_factory=CompensationSeal.generate)
    draining: bool = False
    # The tasks of the requests being handled, so shutdown can wait for them and then cancel.
    handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    # Those of them relaying an event stream that makes no record: cancelled as shutdown starts.
    streams: set[asyncio.Task[Any]] = field(default_factory=set)


PROXY_STATE = web.AppKey("proxy_state", ProxyState)
# Opened when the proxy app starts and closed when it stops (proxy/app.py): one pooled session
# per process, and the flow that sends through it.
CLIENT_SESSION = web.AppKey("client_session", ClientSession)
EFFECT_FLOW = web.AppKey("effect_flow", EffectFlow)
