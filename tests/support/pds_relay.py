"""A fault relay between the proxy and the reference PDS: what a real PDS cannot be made to do.

A real PDS answers every request promptly, so the faults the proxy exists for (an answer that
never comes after the write was applied, a request lost before it arrived) are staged here. The
relay forwards every request to the PDS as it came (method, path and query, end-to-end headers,
body) and relays the answer, except for the next request of an XRPC method a test armed:

- ``HOLD``: forward it, so the PDS applies it, then keep silent for ``hold_s`` (longer than the
  proxy's upstream read timeout, so the proxy gives up first) and drop the connection;
- ``DROP``: read it and close the connection without forwarding it, as if lost on the way.

Every request is logged with what became of it, so a test can tell how often a write reached
the PDS. The relay runs in a :class:`BackgroundServers` thread; the test thread arms it and
reads its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from idemproxy.proxy.headers import HOP_BY_HOP
from tests.support.fakes.serving import BackgroundServers

# Longer than any read timeout the suite gives the proxy, shorter than a test's patience.
DEFAULT_HOLD_S = 10.0
# Hop-by-hop headers (RFC 9110 7.6.1) belong to one connection; Host and Content-Length are
# recomputed for the relay's own connection (the body is passed on unchanged, so the length is
# the same).
_NOT_RELAYED = HOP_BY_HOP | {"host", "content-length"}
# aiohttp's client would otherwise add its own values of these when the request has none: the
# PDS must see the request as the proxy sent it.
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
_SESSION = web.AppKey("session", aiohttp.ClientSession)


class FaultKind(StrEnum):
    HOLD = "hold"  # forwarded and applied; the answer never reaches the proxy
    DROP = "drop"  # never forwarded: lost before the PDS


class Fate(StrEnum):
    """What the relay did with one request."""

    FORWARDED = "forwarded"
    HELD = "held"
    DROPPED = "dropped"

    @property
    def reached_pds(self) -> bool:
        return self is not Fate.DROPPED


@dataclass(frozen=True)
class Passage:
    """One request through the relay."""

    method: str
    path_qs: str
    fate: Fate


@dataclass
class ArmedFault:
    """A one-shot fault for the next request of ``xrpc_method``; ``fired`` is set once it took
    effect (a held request has been applied by the PDS, a dropped one has been read)."""

    kind: FaultKind
    xrpc_method: str
    hold_s: float
    fired: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout_s: float = 30.0) -> None:
        """Block until the fault fired, so a test acts on the fault, never on a guess."""
        if not self.fired.wait(timeout_s):
            raise AssertionError(
                f"the armed {self.kind} of {self.xrpc_method} did not fire in {timeout_s} s:"
                " the request never came through the relay"
            )


def _xrpc_method(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _relayed(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    nominated = {
        token.strip().lower()
        for value in headers.getall("Connection", [])
        for token in value.split(",")
    }
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name.lower() not in _NOT_RELAYED and name.lower() not in nominated:
            kept.add(name, value)
    return kept


async def _client_session(app: web.Application) -> AsyncIterator[None]:
    """One pooled client to the PDS for the relay's lifetime, opened in the relay's loop.

    Answers are passed on as the PDS sent them (no decompression): the proxy must see them so.
    """
    jar = aiohttp.DummyCookieJar()  # a relay keeps no state between requests
    async with aiohttp.ClientSession(auto_decompress=False, cookie_jar=jar) as session:
        app[_SESSION] = session
        yield


def _cut(request: web.Request) -> web.StreamResponse:
    """Close the connection without a byte of answer: the proxy cannot tell what happened."""
    if request.transport is not None:  # None: the proxy has hung up already
        request.transport.close()
    # The handler must return an answer; on the closed connection it is never written.
    return web.Response()


class PdsRelay:
    """Forwards to ``target`` (the PDS's base URL) and stages the armed faults."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.url = ""  # set once served
        self._lock = threading.Lock()
        self._armed: list[ArmedFault] = []
        self._log: list[Passage] = []
        # Set when the relay shuts down: a hold still running ends then, not after hold_s.
        self._closing = asyncio.Event()

    def arm(
        self, xrpc_method: str, kind: FaultKind, *, hold_s: float = DEFAULT_HOLD_S
    ) -> ArmedFault:
        """Stage ``kind`` for the next request whose path ends with ``xrpc_method``."""
        fault = ArmedFault(kind, xrpc_method, hold_s)
        with self._lock:
            self._armed.append(fault)
        return fault

    def passages(self, xrpc_method: str | None = None) -> list[Passage]:
        """The log, oldest first; only requests of ``xrpc_method`` when it is given."""
        with self._lock:
            log = list(self._log)
        if xrpc_method is None:
            return log
        return [p for p in log if _xrpc_method(p.path_qs.split("?", 1)[0]) == xrpc_method]

    def reached_pds(self, xrpc_method: str) -> int:
        """How many requests of ``xrpc_method`` the PDS received (held ones included)."""
        return sum(p.fate.reached_pds for p in self.passages(xrpc_method))

    def reset(self) -> None:
        """Forget the log and disarm what never fired: every test starts from a clean relay."""
        with self._lock:
            self._armed.clear()
            self._log.clear()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.cleanup_ctx.append(_client_session)
        app.on_shutdown.append(self._release_holds)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        return app

    async def _release_holds(self, app: web.Application) -> None:
        self._closing.set()

    def _take(self, path: str) -> ArmedFault | None:
        method = _xrpc_method(path)
        with self._lock:
            for index, fault in enumerate(self._armed):
                if fault.xrpc_method == method:
                    return self._armed.pop(index)
        return None

    def _note(self, request: web.Request, fate: Fate) -> None:
        with self._lock:
            self._log.append(Passage(request.method, request.path_qs, fate))

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        fault = self._take(request.path)
        if fault is not None and fault.kind is FaultKind.DROP:
            self._note(request, Fate.DROPPED)
            fault.fired.set()
            return _cut(request)
        session = request.app[_SESSION]
        async with session.request(
            request.method,
            f"{self.target}{request.path_qs}",
            headers=_relayed(request.headers),
            data=body,
            skip_auto_headers=_NO_AUTO_HEADERS,
            allow_redirects=False,
        ) as answer:
            answer_body = await answer.read()
            status, headers = answer.status, _relayed(answer.headers)
        if fault is None:
            self._note(request, Fate.FORWARDED)
            return web.Response(status=status, headers=headers, body=answer_body)
        self._note(request, Fate.HELD)
        fault.fired.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), fault.hold_s)
        return _cut(request)


@contextmanager
def running_relay(target: str) -> Iterator[PdsRelay]:
    """A relay to ``target`` served on a loopback port in a background thread."""
    servers = BackgroundServers()
    servers.start()
    try:
        relay = PdsRelay(target)
        relay.url = servers.serve(relay.app())
        yield relay
    finally:
        servers.stop()
