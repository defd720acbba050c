"""Sending compensations through this proxy's own listener, as an agent sends its effects, so
that each is claimed, recorded and reported like any other effect (ledger/compensator.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from urllib.parse import quote

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, web
from yarl import URL

from idemproxy.admin.tool_sender import McpSession, tool_answer
from idemproxy.config.settings import HostPort
from idemproxy.effects.paused import COMPENSATES_HEADER
from idemproxy.effects.seal import SEAL_HEADER, CompensationSeal
from idemproxy.ledger.compensator import Outgoing, Sent
from idemproxy.proxy.problems import PROBLEM_CONTENT_TYPE

# The proxy answers within the upstream's own timeouts; this only bounds a proxy that hangs.
TIMEOUT_S = 600.0
DETAIL_CHARS = 300
# A listener on every address is reached on loopback.
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104


def proxy_url(listen: HostPort) -> str:
    """Where this process's proxy listener answers on this host."""
    host = _ANY_ADDRESS.get(listen.host, listen.host)
    return f"http://[{host}]:{listen.port}" if ":" in host else f"http://{host}:{listen.port}"


class ProxySender:
    """A :class:`~idemproxy.ledger.compensator.Sender` over one pooled session, sealing each
    compensation so that the proxy lets it pass the agent's pause (effects/seal.py)."""

    def __init__(self, base_url: str, seal: CompensationSeal) -> None:
        self._base_url = base_url
        self._seal = seal
        self._session: ClientSession | None = None

    async def send(self, outgoing: Outgoing, credentials: Mapping[str, str]) -> Sent:
        if self._session is None:
            self._session = ClientSession(timeout=ClientTimeout(total=TIMEOUT_S))
        url = URL(
            f"{self._base_url}/{quote(outgoing.upstream, safe='')}{outgoing.path}", encoded=True
        )
        headers = {**credentials, **dict(outgoing.headers)}  # the key headers are never replaced
        compensates = headers.get(COMPENSATES_HEADER, "")
        # Sealed as sent: the path and query exactly as they go on the wire.
        headers[SEAL_HEADER] = self._seal.sign(
            outgoing.method, url.raw_path_qs, compensates, outgoing.body
        )
        mcp = McpSession(self._session, url, credentials) if outgoing.mcp else None
        try:
            if mcp is not None and (refused := await mcp.open()) is not None:
                return refused
            if mcp is not None:
                headers.update(mcp.headers)
            async with self._session.request(
                outgoing.method, url, data=outgoing.body, headers=headers
            ) as answer:
                body = await answer.read()
                outcome = answer.headers.get("Idem-Outcome", "")
                if mcp is not None:
                    return tool_answer(answer.status, outcome, answer.content_type, body)
                return Sent(answer.status, outcome, _detail(answer.content_type, body))
        except (ClientError, TimeoutError) as exc:
            return Sent(0, "proxy-unreachable", f"{type(exc).__name__}: {exc}")
        finally:
            if mcp is not None:
                with contextlib.suppress(ClientError, TimeoutError):
                    await mcp.close()

    async def close(self, app: web.Application | None = None) -> None:
        """Close the session (an ``on_cleanup`` handler of the admin app)."""
        if self._session is not None:
            await self._session.close()


def _detail(content_type: str, body: bytes) -> str:
    """What went wrong, for the plan: a problem's detail, else the start of the body."""
    if content_type == PROBLEM_CONTENT_TYPE:
        try:
            return str(orjson.loads(body).get("detail", ""))
        except (orjson.JSONDecodeError, AttributeError):
            pass
    return body[:DETAIL_CHARS].decode("utf-8", "replace")
