"""The admin API's bearer token guard.

Everything on the admin listener but the probes needs ``Authorization: Bearer <admin_token>``
whenever a token is configured.
Without one the admin listener is loopback (config refuses anything else), and the API is open
to local processes: the same trust as the store file or Redis URL they could open directly.
That suits one person's machine; web pages its browser shows are kept out by
:mod:`idemproxy.admin.forgery`. In a pod, loopback is shared with the agent's container, so
there a token is needed (the Helm chart always sets one, and ``serve`` warns without one).
``/healthz``, ``/readyz`` and ``/metrics`` stay open for probes and scrapers either way.
"""

from __future__ import annotations

import hmac

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import SecretStr

from idemproxy.errors import ProblemCode
from idemproxy.proxy.problems import problem_response

# Probes and scrapers carry no token; they learn nothing about records.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def bearer_guard(token: SecretStr | None) -> Middleware:
    """A middleware that refuses API requests without the token: 401, nothing else said."""
    expected = f"Bearer {token.get_secret_value()}".encode() if token is not None else None

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if expected is None or request.path in OPEN_PATHS:
            return await handler(request)
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogatepass")
        if not hmac.compare_digest(given, expected):
            response = problem_response(
                ProblemCode.UNAUTHORIZED,
                "send the admin token as Authorization: Bearer <token> (the proxy's admin_token,"
                " IDEMPROXY_ADMIN_TOKEN)",
            )
            response.headers["WWW-Authenticate"] = 'Bearer realm="idemproxy-admin"'
            return response
        return await handler(request)

    return guard
