"""One exchange with an upstream, and what its failure says about whether the effect happened."""

from __future__ import annotations

import io

import aiohttp
from aiohttp import ClientResponse, ClientSession, ClientTimeout
from multidict import CIMultiDict
from yarl import URL

LARGE_BODY_BYTES = 1 << 20
# Headers aiohttp would add of its own accord: the upstream sees only what the agent sent. The
# session given to Exchange skips them (proxy/app.py builds it so), as naming them on each
# request would build the same set of case-insensitive names again every time.
SKIP_AUTO_HEADERS = ("User-Agent", "Accept-Encoding", "Accept", "Content-Type")


class UpstreamFailure(Exception):
    """The upstream gave no response. ``sent`` is False only when it surely never got one."""

    def __init__(self, *, sent: bool, timed_out: bool, reason: str) -> None:
        super().__init__(reason)
        self.sent = sent
        self.timed_out = timed_out
        self.reason = reason


def classify_failure(exc: BaseException, url: URL) -> UpstreamFailure:
    """What ``exc``, raised by sending to ``url``, says about whether the request was sent."""
    # Connecting failed: not one byte of the request left this process.
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return UpstreamFailure(
            sent=False, timed_out=True, reason=f"connect timeout: {_without_path(exc, url)}"
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamFailure(
            sent=False, timed_out=False, reason=f"cannot connect: {_without_path(exc, url)}"
        )
    # Anything later may have reached the upstream: it is never treated as "not sent".
    if isinstance(exc, aiohttp.SocketTimeoutError | TimeoutError):
        return UpstreamFailure(sent=True, timed_out=True, reason="no answer within read timeout")
    return UpstreamFailure(
        sent=True,
        timed_out=False,
        reason=f"connection lost: {type(exc).__name__}: {_without_path(exc, url)}",
    )


def _without_path(exc: BaseException, url: URL) -> str:
    """``exc`` as text with the request's URL cut to its origin.

    aiohttp names the whole URL in some errors (a connect timeout, a malformed answer), and a
    path may hold a credential (a webhook's or bot's token); a reason is stored and shown.
    """
    text = str(exc)
    origin = str(url.origin())
    for form in (str(url), url.human_repr()):
        text = text.replace(form, origin)
    return text


class Exchange:
    """``async with Exchange(...) as answer``: send the request; the answer once its head is in.

    Raises :class:`UpstreamFailure` if no response head arrives. Redirects are never followed:
    the agent sees exactly what the upstream said.

    A class rather than an ``asynccontextmanager``: every request passes through here, and the
    generator those wrap (one more frame, two more objects, a StopAsyncIteration to leave it)
    costs more than the few lines it saves.
    """

    __slots__ = ("_call", "_response")

    def __init__(
        self,
        session: ClientSession,
        method: str,
        url: URL,
        headers: CIMultiDict[str],
        body: bytes | io.BytesIO | aiohttp.StreamReader | None,
        client_timeout: ClientTimeout,
    ) -> None:
        if isinstance(body, bytes) and len(body) > LARGE_BODY_BYTES:
            # aiohttp writes large byte strings in one go and warns about it; a stream it paces.
            body = io.BytesIO(body)
        self._call = (session, method, url, headers, body, client_timeout)
        self._response: ClientResponse | None = None

    async def __aenter__(self) -> ClientResponse:
        session, method, url, headers, body, client_timeout = self._call
        try:
            self._response = await session.request(
                method,
                url,
                headers=headers,
                data=body,
                timeout=client_timeout,
                allow_redirects=False,
                auto_decompress=False,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise classify_failure(exc, url) from exc
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        if self._response is not None:
            self._response.release()
