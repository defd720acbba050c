"""An agent as the tests run it: the official atproto SDK, pointed at the proxy, tagging its
tool calls with ``Idem-*`` headers, and remembering every answer it got (status, the proxy's
``Idem-Outcome``, body), which the SDK's return values do not show."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
from atproto import Client  # type: ignore[import-untyped]
from atproto_client.client.session import (  # type: ignore[import-untyped]
    Session,
    SessionEvent,
)
from atproto_client.exceptions import AtProtocolError  # type: ignore[import-untyped]
from atproto_client.request import Request  # type: ignore[import-untyped]

from tests.pds.direct import Account
from tests.support.processes import ServedProxy

# atproto hands a blob to httpx as `data=<bytes>`, which httpx 0.28 deprecates in favour of
# `content=`: the SDK's warning, raised inside every upload_blob, not a fault of the code under
# test. Tests that upload through the SDK let this one warning pass, and only this one.
SDK_UPLOADS_AS_DATA = pytest.mark.filterwarnings(
    r"ignore:Use 'content=<\.\.\.>' to upload raw bytes/text content\.:DeprecationWarning"
)
# The SDK's own default (5 s) is about the proxy's read timeout; the proxy must be the one that
# gives up, so the agent waits longer.
SDK_TIMEOUT_S = 30.0


def _xrpc_method(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Batch:
    """A batch of an agent of the test's own.

    Its effect keys are new to the proxy's store, and so is the agent's count of failed
    effects: five in a row pause an agent, and a test that expects failures must not pause the
    agent of the tests after it.
    """

    agent: str
    name: str

    def tool_call(self, call: str = "call-1") -> dict[str, str]:
        """The headers an agent's SDK wrapper sets for one tool call of this batch."""
        return {"Idem-Agent": self.agent, "Idem-Batch": self.name, "Idem-Tool-Call": call}


@dataclass(frozen=True, repr=False)
class Answer:
    """One answer the SDK received."""

    url: str
    status: int
    outcome: str | None  # the proxy's Idem-Outcome; None on an answer that skipped the proxy
    body: bytes

    @property
    def xrpc_method(self) -> str:
        return _xrpc_method(self.url)

    def __repr__(self) -> str:
        # Short, for assertion messages: an answer's body may be a whole session's tokens.
        return f"<{self.status} {self.outcome} {self.xrpc_method}: {self.body[:160]!r}>"

    def json(self) -> dict[str, Any]:
        document = orjson.loads(self.body)
        assert isinstance(document, dict), self.body
        return document


class Agent:
    """One run of an agent: a fresh SDK client, as after a restart, with its tool-call headers."""

    def __init__(self, proxy_url: str, headers: dict[str, str]) -> None:
        self.base_url = f"{proxy_url}/bluesky"
        self._answers: list[Answer] = []
        self._sent: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        self.sessions: list[Session] = []
        hooks = {"request": [self._sending], "response": [self._seen]}
        request = Request(timeout=SDK_TIMEOUT_S, event_hooks=hooks)
        self.client = Client(base_url=self.base_url, request=request)
        self.client.on_session_change(self._session_changed)
        self.tag(headers)

    def login(self, account: Account) -> None:
        """``createSession`` through the proxy, and nothing else.

        ``Client.login`` also looks up the account's Bluesky profile
        (``app.bsky.actor.getProfile``), which only an AppView serves; this PDS has none and
        answers 400 "No service configured", which fails the login. The profile plays no part
        in writing records, so the lookup is skipped (``fetch_bsky_profile=False``); ``me``
        stays None, and posts name their repo (``profile_identify``) instead.
        """
        self.client.login(account.handle, account.password, fetch_bsky_profile=False)

    @property
    def answers(self) -> list[Answer]:
        with self._lock:
            return list(self._answers)

    def answer(self, xrpc_method: str) -> Answer:
        """The last answer to a call of ``xrpc_method``."""
        matching = [a for a in self.answers if a.xrpc_method == xrpc_method]
        assert matching, f"no answer to {xrpc_method} among {[a.url for a in self.answers]}"
        return matching[-1]

    def tag(self, headers: dict[str, str]) -> None:
        """Send ``headers`` with every later call (a header of the same name is replaced)."""
        for name, value in headers.items():
            self.client.request.add_additional_header(name, value)

    def attempt(self, call: Callable[[], object], xrpc_method: str) -> Answer:
        """Make ``call`` and return the answer it got, error or not: for tests about what the
        agent is told, where an exception would hide the status and the proxy's outcome."""
        with contextlib.suppress(AtProtocolError):
            call()
        return self.answer(xrpc_method)

    def sent(self, xrpc_method: str) -> list[dict[str, Any]]:
        """The JSON bodies the SDK sent to ``xrpc_method``, oldest first."""
        with self._lock:
            sent = list(self._sent)
        return [orjson.loads(body) for url, body in sent if _xrpc_method(url) == xrpc_method]

    @property
    def pds_endpoint(self) -> str | None:
        """Where the SDK sends its calls since the last session change (login, refresh)."""
        return self.sessions[-1].pds_endpoint if self.sessions else None

    def close(self) -> None:
        self.client.request.close()

    def _sending(self, request: httpx.Request) -> None:
        with self._lock:
            self._sent.append((str(request.url), request.content))

    def _seen(self, response: httpx.Response) -> None:
        # Read here, in the hook: the SDK reads it again from httpx's cache.
        body = response.read()
        answer = Answer(
            str(response.request.url),
            response.status_code,
            response.headers.get("Idem-Outcome"),
            body,
        )
        with self._lock:
            self._answers.append(answer)

    def _session_changed(self, event: SessionEvent, session: Session) -> None:
        self.sessions.append(session)


class Agents:
    """Starts agent runs (fresh SDK clients) and closes them after the test."""

    def __init__(self, proxy: ServedProxy) -> None:
        self.proxy = proxy
        self._started: list[Agent] = []

    def start(
        self,
        account: Account | None,
        headers: dict[str, str],
        *,
        via: ServedProxy | None = None,
    ) -> Agent:
        """An agent on ``via`` (the session's proxy by default), logged in unless no account."""
        agent = Agent((via or self.proxy).url, headers)
        self._started.append(agent)
        if account is not None:
            agent.login(account)
        return agent

    def close(self) -> None:
        for agent in self._started:
            agent.close()
