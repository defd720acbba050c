"""The console's guard chain, in the order it runs (the admin API's guards skip the console:
admin/console/app.py):

1. **reach**: ``console: loopback`` answers peers on loopback only (this host, or a
   ``kubectl port-forward``, which arrives there); others get 403 saying so.
2. **host**: the admin listener's ``Host`` allow-list (admin/forgery.py), against DNS rebinding.
3. **origin**: a form (any method but GET and HEAD) must come from a console page: an
   ``Origin`` other than the listener's own, or a ``Sec-Fetch-Site`` other than
   ``same-origin``, is refused before its body is read. Stricter than the admin API's check
   (admin/forgery.py), which admits ``none`` (an address typed by hand): no form is typed.
4. **session**: every page but sign-in and the stylesheet needs a valid session cookie
   (session.py); a GET without one is sent to sign in, a form refused.
5. **csrf**: every form of a session carries its CSRF token, compared in constant time.

Each refusal is an HTML page that says what to do, and a warning in the log.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from idemproxy.admin.console.session import COOKIE, CSRF_FIELD, Sessions
from idemproxy.admin.console.views import CSRF_TOKEN, PREFIX, SESSION, message, see_other
from idemproxy.admin.forgery import BODILESS, Guarded, HostAllowList, refused
from idemproxy.config.settings import ConsoleReach

SIGN_IN = f"{PREFIX}/signin"
# Reachable without a session: the sign-in itself, and the stylesheet its page loads.
OPEN = frozenset({SIGN_IN, f"{PREFIX}/static/console.css"})


def _loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False


CONSOLE = Guarded("the console", "its own pages")


def _refused(request: web.Request, why: str) -> None:
    refused(request, why, CONSOLE)


def _same_origin(request: web.Request) -> bool:
    origin, host = request.headers.get("Origin"), request.headers.get("Host")
    if origin is not None and (host is None or origin.lower() != f"http://{host}".lower()):
        return False
    return request.headers.get("Sec-Fetch-Site", "same-origin").lower() == "same-origin"


def reach_guard(reach: ConsoleReach, hosts: HostAllowList) -> Middleware:
    """Steps 1 to 3: who may reach the console, under which name, and whose forms it takes."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if reach is ConsoleReach.LOOPBACK and not _loopback(request.remote):
            _refused(request, "a peer not on loopback")
            return message(
                request,
                403,
                "The console answers on loopback only",
                "This proxy's console answers requests from its own host only (console:"
                " loopback). Reach it through `kubectl port-forward` or an SSH tunnel, or set"
                " console: any (IDEMPROXY_CONSOLE=any) if the admin listener's network is"
                " trusted.",
            )
        host = request.headers.get("Host")
        if host is not None and not hosts.admits(host):
            _refused(request, "a foreign Host")
            return message(
                request,
                403,
                "Unknown host name",
                f"The console answers to its own names only, and {host!r} is not one of them"
                " (a web page may be reaching it by DNS rebinding). Address it as 127.0.0.1 or"
                " localhost, or add the name to admin_hosts (IDEMPROXY_ADMIN_HOSTS).",
            )
        if request.method not in BODILESS and not _same_origin(request):
            _refused(request, "a form from another origin")
            return message(
                request,
                403,
                "Form from another site",
                "The console takes forms from its own pages only, and this one came from"
                f" {request.headers.get('Origin') or 'another site'}. Nothing was changed.",
            )
        return await handler(request)

    return guard


def session_guard(sessions: Sessions) -> Middleware:
    """Steps 4 and 5: a signed-in browser, and the session's own forms."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        session = sessions.read(request.cookies.get(COOKIE))
        if session is not None:
            request[SESSION] = session
            request[CSRF_TOKEN] = sessions.csrf(session)
        if request.path in OPEN:
            return await handler(request)
        if session is None:
            if request.method in BODILESS:
                return see_other(SIGN_IN)
            _refused(request, "a form without a session")
            return message(
                request,
                401,
                "Signed out",
                "This form needs a signed-in console: sign in again, then repeat the action."
                " Nothing was changed.",
            )
        if request.method not in BODILESS:
            form = await request.post()
            given = form.get(CSRF_FIELD)
            if not isinstance(given, str) or not sessions.checks(session, given):
                _refused(request, "a form without this session's CSRF token")
                return message(
                    request,
                    403,
                    "Form expired",
                    "This form does not belong to this sign-in (it was loaded before a sign-in,"
                    " or came from elsewhere). Load the page again and repeat the action."
                    " Nothing was changed.",
                )
        return await handler(request)

    return guard
