"""The operator console: HTML pages under ``/console/`` on the admin listener, over the same
:class:`LedgerService` as the admin API (README.md, "Operator console").

It is a sub-app with its own guard chain (guards.py). aiohttp runs the admin app's middlewares
for a sub-app's requests too, before the sub-app's own, so :func:`outside_console` makes each of
the API's guards step aside for a request routed into the console, and for no other: the
decision is the router's (the apps the request was matched through), not a second reading of
its path. Everything else on the listener keeps the API's guards exactly as they are.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from idemproxy.admin.console import actions, pages
from idemproxy.admin.console.guards import reach_guard, session_guard
from idemproxy.admin.console.session import Sessions
from idemproxy.admin.console.views import PAGE_HEADERS, PREFIX, message
from idemproxy.admin.forgery import HostAllowList
from idemproxy.config.settings import ConsoleReach, ProxyConfig
from idemproxy.ledger.service import LedgerService

# Marks the console app among those a request was routed through.
CONSOLE = web.AppKey("console", bool)
STYLESHEET = resources.files("idemproxy.admin.console").joinpath("static/console.css")


def _in_console(request: web.Request) -> bool:
    return any(CONSOLE in app for app in request.match_info.apps)


def outside_console(guard: Middleware) -> Middleware:
    """``guard`` for every request but those routed into the console."""

    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _in_console(request):
            return await handler(request)
        return await guard(request, handler)

    return guarded


async def stylesheet(request: web.Request) -> web.Response:
    return web.Response(
        body=STYLESHEET.read_bytes(),
        content_type="text/css",
        charset="utf-8",
        headers={**PAGE_HEADERS, "Cache-Control": "max-age=300"},
    )


async def needs_token(request: web.Request) -> web.Response:
    return message(
        request,
        503,
        "The console needs an admin token",
        "This proxy has no admin_token, and the console signs in with it. Set"
        " IDEMPROXY_ADMIN_TOKEN (or admin_token in the config file) to a random secret, e.g."
        " the output of `openssl rand -hex 32`, and restart the proxy.",
    )


def build_console(config: ProxyConfig, service: LedgerService) -> web.Application:
    """The console app, to mount at :data:`PREFIX`: without an admin token, a page saying it
    needs one and nothing else."""
    hosts = HostAllowList([config.admin_listen.host, *config.admin_hosts])
    guards = [reach_guard(config.console, hosts)]
    sessions = Sessions(config.admin_token) if config.admin_token is not None else None
    if sessions is not None:
        guards += [session_guard(sessions), pages.refusals]
    app = web.Application(middlewares=guards)
    app[CONSOLE] = True
    app.router.add_get("/static/console.css", stylesheet)
    if sessions is None:
        app.router.add_route("*", "", needs_token)
        app.router.add_route("*", "/{tail:.*}", needs_token)
        return app
    app[pages.LEDGER] = service
    pages.add_pages(app.router)
    actions.add_actions(app.router, sessions)
    pages.add_fallback(app.router)
    return app


def mount_console(admin: web.Application, config: ProxyConfig, service: LedgerService) -> None:
    """Mount the console on the admin app at :data:`PREFIX`, unless ``console: off``."""
    if config.console is not ConsoleReach.OFF:
        admin.add_subapp(PREFIX, build_console(config, service))
