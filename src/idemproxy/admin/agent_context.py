"""The agent's read-only window on the proxy listener: its own batches' recovery context
(ledger/context.py), without the admin token (SPEC 7)::

    GET /_idemproxy/v1/batches/{batch}/context

The prefix can never be an upstream's (config/settings.py ``UpstreamName`` starts with a
letter or digit), so it shadows none. The agent is the sidecar's ``agent_id``, or the
``Idem-Agent`` header where ``allow_agent_header`` lets it name itself (effectkeys.py), as for
its effects: a pinned sidecar's agent reads its own batches and nothing else. Nothing else is
served here, and the browser guards of the admin API (admin/forgery.py) stand before it: a web
page on the agent's host cannot read a batch's context through a foreign ``Host`` or origin.
"""

from __future__ import annotations

from aiohttp import web

from idemproxy.admin.api import problems
from idemproxy.admin.forgery import Guarded, HostAllowList, browser_guard
from idemproxy.config.settings import ProxyConfig
from idemproxy.effectkeys import AGENT_HEADER, KeyHeaders, resolve_agent
from idemproxy.ledger.audit import ActionLimit
from idemproxy.ledger.context import recovery_context
from idemproxy.ledger.documents import value
from idemproxy.ledger.recovery import Recovery
from idemproxy.store.protocols import Store

PREFIX = "/_idemproxy"
CONTEXT_ROUTE = "/v1/batches/{batch}/context"
CONTEXT_PATH = PREFIX + CONTEXT_ROUTE

_RECOVERY = web.AppKey("recovery", Recovery)
_CONFIG = web.AppKey("config", ProxyConfig)


async def context(request: web.Request) -> web.Response:
    config = request.app[_CONFIG]
    named = KeyHeaders(agent=request.headers.get(AGENT_HEADER))
    agent = resolve_agent(named, config.agent_id, config.allow_agent_header)
    progress = await request.app[_RECOVERY].progress(agent, request.match_info["batch"])
    # Never cached: it changes as soon as the batch moves on, and it is the agent's alone.
    return web.json_response(
        value(recovery_context(progress)), headers={"Cache-Control": "no-store"}
    )


def build_agent_app(config: ProxyConfig, store: Store) -> web.Application:
    """The sub-application to mount at :data:`PREFIX` on the proxy listener."""
    hosts = HostAllowList([config.listen.host, *config.admin_hosts])
    guarded = Guarded(
        "the recovery context", "the agent (`idemproxy.agent.recovery_context`), curl or a program"
    )
    app = web.Application(middlewares=[browser_guard(hosts, guarded), problems])
    app[_CONFIG] = config
    # Reading progress is no recovery action: the limit is never consulted.
    app[_RECOVERY] = Recovery(store, ActionLimit(store, config.recovery.actions_per_minute))
    app.router.add_get(CONTEXT_ROUTE, context)
    return app
