"""The admin listener: health, readiness, Prometheus metrics, the admin API (admin/api.py) and
the operator console (admin/console/)."""

from __future__ import annotations

import asyncio
import logging
import os

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from idemproxy.admin.api import add_api, problems
from idemproxy.admin.auth import bearer_guard
from idemproxy.admin.console.app import mount_console, outside_console
from idemproxy.admin.duplicates import add_duplicates
from idemproxy.admin.forgery import HostAllowList, browser_guard, json_bodies
from idemproxy.admin.sender import ProxySender, proxy_url
from idemproxy.ledger.compensator import Compensator
from idemproxy.ledger.service import LedgerService
from idemproxy.proxy.state import ProxyState
from idemproxy.store.errors import StoreError
from idemproxy.storeguard import SafetyStatus

log = logging.getLogger(__name__)

ADMIN_STATE = web.AppKey("admin_state", ProxyState)
READY_TIMEOUT_S = 2.0
# Set in every Kubernetes container: there, loopback is shared with the pod's other containers.
IN_KUBERNETES_ENV = "KUBERNETES_SERVICE_HOST"


async def healthz(request: web.Request) -> web.Response:
    """The process is up and its event loop answers."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready when the configuration is loaded, the store answers and it keeps records: not
    when it may evict them or has lost some (or keeps nothing on disk, where the settings
    require it). ``warnings`` names the risks the settings accept."""
    state = request.app[ADMIN_STATE]
    if state.draining:
        return web.json_response({"status": "draining"}, status=503)
    try:
        await asyncio.wait_for(state.store.ping(), READY_TIMEOUT_S)
        verdict = await asyncio.wait_for(state.guard.check(), READY_TIMEOUT_S)
    except (StoreError, TimeoutError) as exc:
        reason = f"store {state.store.backend} unreachable: {exc or type(exc).__name__}"
        return web.json_response({"status": "unavailable", "reason": reason}, status=503)
    document = {
        "status": verdict.status.value,
        "store": state.store.backend,
        "warnings": list(verdict.warnings),
    }
    if verdict.status is not SafetyStatus.READY:
        return web.json_response({**document, "reason": verdict.reason}, status=503)
    return web.json_response(document)


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[ADMIN_STATE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def build_admin_app(state: ProxyState) -> web.Application:
    config = state.config
    hosts = HostAllowList([config.admin_listen.host, *config.admin_hosts])
    # A browser's request is refused before the token is even looked at; a caller without the
    # token learns nothing else, not even which body to send.
    guards = [browser_guard(hosts), bearer_guard(config.admin_token), json_bodies, problems]
    # The console's pages are for browsers and forms: it has guards of its own
    # (admin/console/guards.py), and the API's step aside for it alone.
    app = web.Application(middlewares=[outside_console(guard) for guard in guards])
    app[ADMIN_STATE] = state
    if config.admin_token is None and IN_KUBERNETES_ENV in os.environ:
        log.warning(
            "no admin_token, in a Kubernetes pod: every container of the pod shares loopback,"
            " so the agent can pause and resume itself and resolve its own reviews through the"
            " admin API; set IDEMPROXY_ADMIN_TOKEN from a Secret only this container mounts"
            " (the Helm chart does)"
        )
    sender = ProxySender(proxy_url(config.listen), state.seal)
    policies = {name: upstream.policy for name, upstream in state.upstreams.items()}
    compensator = Compensator(policies, sender)
    limit, controller = config.recovery.actions_per_minute, config.controller
    service = LedgerService(
        state.store, limit, compensator, state.guard, controller, metrics=state.metrics
    )
    add_api(app, service)
    mount_console(app, config, service)
    add_duplicates(app, state.metrics.blocked)
    app.on_cleanup.append(sender.close)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
