"""The proxy's aiohttp application: one catch-all handler, one pooled ClientSession."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from aiohttp import ClientSession, TCPConnector, web

from idemproxy import __version__
from idemproxy.effects.audit import EffectAudit
from idemproxy.effects.flow import EffectFlow
from idemproxy.proxy.forward import SKIP_AUTO_HEADERS
from idemproxy.proxy.handler import ProxyHandler
from idemproxy.proxy.malformed import quiet_malformed_requests
from idemproxy.proxy.state import CLIENT_SESSION, EFFECT_FLOW, PROXY_STATE, ProxyState

# Shorter than the idle timeout of common servers (nginx and aiohttp keep 75 s), so a pooled
# connection is retired by us before the upstream closes it under a request we just sent: that
# race would look like "sent, connection lost" and turn a harmless call into an unknown outcome.
POOL_KEEPALIVE_S = 15.0


async def _session_and_flow(app: web.Application) -> AsyncIterator[None]:
    """Open the pooled session and build the flow on it as the app starts; close it at the end."""
    state = app[PROXY_STATE]
    limit = sum(upstream.max_connections for upstream in state.config.upstreams.values()) or 100
    session = ClientSession(
        connector=TCPConnector(limit=limit, keepalive_timeout=POOL_KEEPALIVE_S),
        auto_decompress=False,
        skip_auto_headers=SKIP_AUTO_HEADERS,
        headers={"Via": f"1.1 idemproxy/{__version__}"},
    )
    app[CLIENT_SESSION] = session
    app[EFFECT_FLOW] = EffectFlow(
        state.store,
        state.store,
        state.attempts,
        state.metrics,
        session,
        EffectAudit(state.store),
        pause_after_failures=state.config.recovery.pause_after_failures,
        agent_write_timeout_s=state.config.agent_write_timeout_s,
    )
    yield
    await session.close()


def build_proxy_app(
    state: ProxyState, mounts: Mapping[str, web.Application] | None = None
) -> web.Application:
    """``mounts``: sub-applications served at their prefixes (which no upstream name can be),
    ahead of the upstreams: the agent's own window (admin/agent_context.py)."""
    quiet_malformed_requests()
    app = web.Application(client_max_size=0)
    app[PROXY_STATE] = state
    app.cleanup_ctx.append(_session_and_flow)
    for prefix, mounted in (mounts or {}).items():
        app.add_subapp(prefix, mounted)
    app.router.add_route("*", "/{tail:.*}", ProxyHandler(state).handle)
    return app
