"""A client of the admin API: the :class:`~idemproxy.ledger.operator.Operator` of a running
proxy, for the CLI's ``--admin-url``. Problems come back as the same ``RequestRefused`` the
service raises locally, so the CLI handles both alike. When the admin API cannot be used at
all, the client says why, in the CLI's terms::

    AdminUnavailable          the admin API cannot be used at the URL
     +-- AdminUnreachable     nothing answers there
     +-- NotAdminAPI          something answers, but it is not idemproxy's admin API
     +-- AdminUnauthorized    the admin API refused the token, or wants one and got none
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from aiohttp import (
    ClientError,
    ClientSession,
    ClientTimeout,
)
from yarl import URL

from idemproxy.admin.answers import TIMEOUT_S, answer_document, reason, refusal
from idemproxy.errors import IdemproxyError, ProblemCode
from idemproxy.ledger.approvals import Verdict
from idemproxy.ledger.documents import Document
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.review import Decision
from idemproxy.proxy.problems import PROBLEM_TYPE_BASE

DEFAULT_ADMIN_URL = "http://127.0.0.1:9090"
_WHERE_IT_IS = f"the admin API is on the proxy's admin_listen, default {DEFAULT_ADMIN_URL}"


class AdminUnavailable(IdemproxyError):
    """The admin API cannot be used at the URL; the message says why and what to do."""


class AdminUnreachable(AdminUnavailable):
    """Nothing answers at the URL (refused, timed out, cut off)."""


class NotAdminAPI(AdminUnavailable):
    """A server answers at the URL, but not as idemproxy's admin API does."""


class AdminUnauthorized(AdminUnavailable):
    """The admin API wants its token and got none, or refused the one it got."""


def admin_url(text: str) -> str:
    """The admin API's base URL, without a trailing slash; ValueError says what is wrong."""
    try:
        url = URL(text)
        host = url.host
    except (ValueError, TypeError):
        url, host = URL(), None
    if url.scheme not in ("http", "https") or not host:
        raise ValueError(
            f"{text!r} is not an http(s) URL of the admin listener; write it like"
            f" {DEFAULT_ADMIN_URL}"
        )
    if url.query_string or url.fragment:
        raise ValueError(
            f"{text!r} must have no query or fragment; write it like {DEFAULT_ADMIN_URL}"
        )
    return str(url).rstrip("/")


def _segment(value: str) -> str:
    return quote(value, safe="")


class AdminClient:
    """Calls of the admin API at ``base_url``, with ``token`` as the bearer token if there is
    one; ``given_as`` says where the token came from, for the message if it is refused."""

    def __init__(self, base_url: str, token: str | None = None, given_as: str = "") -> None:
        self._base_url = base_url.rstrip("/")
        self._token_source = (given_as or "given") if token else ""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._session = ClientSession(headers=headers, timeout=ClientTimeout(total=TIMEOUT_S))

    async def close(self) -> None:
        await self._session.close()

    async def _call(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Document:
        url = self._base_url + path
        params = {name: value for name, value in (query or {}).items() if value}
        try:
            async with self._session.request(method, url, params=params, json=body) as response:
                raw = await response.read()
                status, content_type = response.status, response.content_type
                retry_after = response.headers.get("Retry-After", "")
        except (ClientError, TimeoutError) as exc:
            raise AdminUnreachable(
                f"nothing answers at {self._base_url} ({reason(exc)}): is the proxy running,"
                " with its admin listener (admin_listen) there? Pass --admin-url, or --store to"
                " work on the store directly"
            ) from exc
        document = answer_document(raw, content_type)
        answered = f"{method} {path} with {status} {content_type}"
        if document is None:
            raise self._not_admin(f"it answered {answered}")
        if status < 400:
            return document
        code_text = str(document.get("type", ""))
        if not code_text.startswith(PROBLEM_TYPE_BASE):
            raise self._not_admin(f"it answered {answered} that is not an idemproxy problem")
        if status == 401:
            raise self._unauthorized()
        refused = refusal(status, document, retry_after)
        if status == 403:
            raise AdminUnauthorized(
                f"the admin API at {self._base_url} refused the request: {refused.detail}"
            )
        if refused.code is ProblemCode.UNKNOWN_UPSTREAM:
            raise self._not_admin(
                "it is the proxy's own listener (listen), which took /v1 for an upstream's name"
            )
        raise refused

    def _not_admin(self, why: str) -> NotAdminAPI:
        return NotAdminAPI(
            f"the server at {self._base_url} is not idemproxy's admin API: {why}. Pass"
            f" --admin-url: {_WHERE_IT_IS}"
        )

    def not_a_document(self, missing: str) -> NotAdminAPI:
        """The error for an answer that is JSON but lacks what the admin API's has."""
        return self._not_admin(f"its answer is not a document of the admin API (no {missing})")

    def _unauthorized(self) -> AdminUnauthorized:
        if not self._token_source:
            return AdminUnauthorized(
                f"the admin API at {self._base_url} needs its token and none was given: set"
                " IDEMPROXY_ADMIN_TOKEN to the proxy's admin_token, or pass --token"
            )
        return AdminUnauthorized(
            f"the admin API at {self._base_url} refused the token {self._token_source}: it is"
            " not the proxy's admin_token"
        )

    async def status(self) -> Document:
        return await self._call("GET", "/v1/status")

    async def effect(self, key: str) -> Document:
        return await self._call("GET", f"/v1/effects/{_segment(key)}")

    async def events(self, agent: str, after: str | None, limit: int) -> Document:
        query = {"after": after or "", "limit": str(limit)}
        return await self._call("GET", f"/v1/agents/{_segment(agent)}/events", query)

    async def batch(self, agent: str, batch: str) -> Document:
        return await self._call("GET", f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}")

    async def batches(self, agent: str, limit: int) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches"
        return await self._call("GET", path, {"limit": str(limit)})

    async def recover(
        self, agent: str, batch: str, mode: RecoverMode, actor: str, note: str
    ) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}/recover"
        body = {"strategy": mode.value, "actor": actor, "note": note}
        return await self._call("POST", path, body=body)

    async def review(self, agent: str | None, limit: int) -> Document:
        return await self._call("GET", "/v1/review", {"agent": agent or "", "limit": str(limit)})

    async def resolve(
        self,
        key: str,
        decision: Decision,
        actor: str,
        note: str,
        external_id: str = "",
        response: Document | None = None,
    ) -> Document:
        body: dict[str, Any] = {"as": decision.value, "actor": actor, "note": note}
        body["external_id"] = external_id
        if response is not None:
            body["response"] = response
        return await self._call("POST", f"/v1/review/{_segment(key)}/resolution", body=body)

    async def deliveries(self, agent: str | None) -> Document:
        return await self._call("GET", "/v1/delivery", {"agent": agent or ""})

    async def retry_delivery(self, agent: str, actor: str, note: str) -> Document:
        path = f"/v1/agents/{_segment(agent)}/delivery/retry"
        return await self._call("POST", path, body={"actor": actor, "note": note})

    async def audit(self, agent: str, limit: int) -> Document:
        return await self._call("GET", f"/v1/agents/{_segment(agent)}/audit", {"limit": str(limit)})

    async def agent(self, agent: str) -> Document:
        return await self._call("GET", f"/v1/agents/{_segment(agent)}")

    async def pause(self, agent: str, actor: str, note: str) -> Document:
        path = f"/v1/agents/{_segment(agent)}/pause"
        return await self._call("POST", path, body={"actor": actor, "note": note})

    async def resume(self, agent: str, actor: str, note: str) -> Document:
        path = f"/v1/agents/{_segment(agent)}/resume"
        return await self._call("POST", path, body={"actor": actor, "note": note})

    async def compensation(self, agent: str, batch: str) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}/compensation"
        return await self._call("GET", path)

    async def compensate(
        self,
        agent: str,
        batch: str,
        actor: str,
        note: str,
        credentials: Mapping[str, Mapping[str, str]],
    ) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}/compensation"
        body = {"actor": actor, "note": note, "headers": credentials}
        return await self._call("POST", path, body=body)

    async def rollback(
        self,
        agent: str,
        target: str,
        actor: str,
        note: str,
        credentials: Mapping[str, Mapping[str, str]] | None,
    ) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches/{_segment(target)}/rollback"
        if credentials is None:
            return await self._call("GET", path)
        body = {"actor": actor, "note": note, "headers": credentials}
        return await self._call("POST", path, body=body)

    async def retry(self, key: str, actor: str, note: str) -> Document:
        path = f"/v1/review/{_segment(key)}/retry"
        return await self._call("POST", path, body={"actor": actor, "note": note})

    async def store_status(self) -> Document:
        return await self._call("GET", "/v1/store")

    async def acknowledge_loss(self, actor: str, note: str) -> Document:
        body = {"actor": actor, "note": note}
        return await self._call("POST", "/v1/store/acknowledge-loss", body=body)

    async def approvals(self, agent: str | None, limit: int) -> Document:
        return await self._call("GET", "/v1/approvals", {"agent": agent or "", "limit": str(limit)})

    async def approval(self, agent: str, approval_id: str) -> Document:
        return await self._call("GET", f"/v1/approvals/{_segment(agent)}/{_segment(approval_id)}")

    async def decide(
        self, agent: str, approval_id: str, verdict: Verdict, actor: str, note: str
    ) -> Document:
        path = f"/v1/approvals/{_segment(agent)}/{_segment(approval_id)}/decision"
        body = {"as": verdict.value, "actor": actor, "note": note}
        return await self._call("POST", path, body=body)

    async def duplicates(self, agent: str | None, limit: int) -> Document:
        query = {"agent": agent or "", "limit": str(limit)}
        return await self._call("GET", "/v1/duplicates", query)
