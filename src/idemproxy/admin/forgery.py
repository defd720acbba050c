"""What a web page can make a browser send to the admin API, refused before anything is read
or changed (docs/recovery.md, "Security of the admin API").

Without a token the admin listener is loopback and open to local processes, and a browser on
the same host is one, acting for whatever page it shows. A page cannot set ``Authorization``,
nor send ``application/json`` to another origin without a CORS preflight (which the admin API
never grants), but it can send "simple" requests (``text/plain``, forms) and, through DNS
rebinding, address the listener under a name of its own, which makes its requests same-origin
to the browser and their answers readable. So, on every path but the probes:

- ``Host`` must be an IP address (a page's origin is then that address, which cannot be rebound
  to this listener), ``localhost``, admin_listen's own host or a name in ``admin_hosts``; the
  port is not compared, so a port-forward or tunnel on another port works;
- a browser's ``Origin`` must be the listener's own, and its ``Sec-Fetch-Site`` ``same-origin``
  or ``none`` (an address typed by hand);
- a request with a body (every POST) must send ``Content-Type: application/json``, which a page
  can only send cross-origin after a preflight.
This holds with a token as well: it costs a legitimate client nothing.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from idemproxy.admin.auth import OPEN_PATHS
from idemproxy.errors import ProblemCode
from idemproxy.proxy.problems import JSON_CONTENT_TYPE, problem_response

log = logging.getLogger(__name__)

# Methods that never carry a body here. OPTIONS is aiohttp's to refuse (405): no preflight is
# ever granted.
BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})
# Fetch metadata of a request a page could not have forged: its own origin, or the user's typing.
OWN_FETCHES = frozenset({"same-origin", "none"})
LOCALHOST = "localhost"


def host_name(host: str) -> str:
    """The name or address in a ``Host`` header, without its port, in lower case."""
    host = host.strip().lower()
    if host.startswith("["):  # [v6]:port
        return host[1:].partition("]")[0]
    name, colon, port = host.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        host = name
    return host.rstrip(".")


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowList:
    """The names the admin listener answers to; IP addresses are always among them."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = frozenset({LOCALHOST, *(host_name(name) for name in names)})

    def admits(self, host: str) -> bool:
        name = host_name(host)
        return name in self._names or is_address(name)


@dataclass(frozen=True, slots=True)
class Guarded:
    """What a guard keeps pages away from, as its refusals name it."""

    name: str  # "the admin API"
    callers: str  # who may call it instead of a page


ADMIN_API = Guarded("the admin API", "the CLI (`idemproxy ... --admin-url`), curl or a program")


def browser_guard(hosts: HostAllowList, guarded: Guarded = ADMIN_API) -> Middleware:
    """Refuse foreign ``Host`` headers (403 ``foreign-host``) and other origins' requests (403
    ``cross-origin-request``), probes excepted: the kubelet and Prometheus use the pod's
    address, and the probes tell nothing about records."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        host = request.headers.get("Host")
        if host is not None and not hosts.admits(host):
            refused(request, "a foreign Host: a web page may be trying to use it", guarded)
            return problem_response(
                ProblemCode.FOREIGN_HOST,
                f"{guarded.name} answers to its own names only, and Host: {host!r} is not one of"
                " them (a web page may be reaching it by DNS rebinding). Address it as"
                " 127.0.0.1 or localhost, or add this name to admin_hosts"
                " (IDEMPROXY_ADMIN_HOSTS) if it is really the proxy's",
            )
        if not _own_origin(request, host):
            refused(request, "a cross-origin request: a web page may be trying to use it", guarded)
            return problem_response(
                ProblemCode.CROSS_ORIGIN_REQUEST,
                f"{guarded.name} takes no requests from web pages, and this one came from"
                f" {request.headers.get('Origin') or 'another site'}; call it from"
                f" {guarded.callers}, which send no Origin",
            )
        return await handler(request)

    return guard


@web.middleware
async def json_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a body that is not ``application/json`` (415 ``unsupported-media-type``),
    charset or not: every form and ``text/plain`` body a page can post unasked."""
    if request.method in BODILESS or request.path in OPEN_PATHS:
        return await handler(request)
    if request.content_type != JSON_CONTENT_TYPE:
        sent = request.headers.get("Content-Type")
        came = f"this one came as {sent!r}" if sent else "this one had no Content-Type"
        return problem_response(
            ProblemCode.UNSUPPORTED_MEDIA_TYPE,
            f"the admin API takes JSON bodies only, and {came}: send a JSON object with"
            " Content-Type: application/json ({} will do where nothing needs saying)",
        )
    return await handler(request)


def _own_origin(request: web.Request, host: str | None) -> bool:
    origin = request.headers.get("Origin")
    if origin is not None and (host is None or origin.lower() != f"http://{host}".lower()):
        return False
    return request.headers.get("Sec-Fetch-Site", "none").lower() in OWN_FETCHES


def refused(request: web.Request, why: str, guarded: Guarded) -> None:
    """Log a refusal with what a reader needs to find where the request came from."""
    log.warning(
        "%s refused %s",
        guarded.name,
        why,
        extra={
            "method": request.method,
            "path": request.path,
            "host": request.headers.get("Host", ""),
            "origin": request.headers.get("Origin", ""),
            "remote": request.remote or "",
        },
    )
