"""A client of the admin API: the :class:`~idemproxy.ledger.service.Operator` of a running
proxy, for the CLI's ``--admin-url``. Problems come back as the same ``RequestRefused`` the
service raises locally, so the CLI handles both alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from aiohttp import ClientError, ClientSession, ClientTimeout

from idemproxy.errors import ConfigError, ProblemCode, RequestRefused
from idemproxy.ledger.documents import Document
from idemproxy.proxy.problems import PROBLEM_TYPE_BASE

TIMEOUT_S = 30.0


def _segment(value: str) -> str:
    return quote(value, safe="")


class AdminClient:
    def __init__(self, base_url: str, token: str | None = None) -> None:
        self._base_url = base_url.rstrip("/")
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
                document = await response.json(content_type=None)
                status = response.status
                retry_after = response.headers.get("Retry-After", "")
        except (ClientError, TimeoutError, ValueError) as exc:
            raise ConfigError(
                f"cannot use the admin API at {self._base_url} ({exc or type(exc).__name__}):"
                " is the proxy running there? Pass --admin-url, or --store to work on the store"
            ) from exc
        if status >= 400:
            raise _refusal(status, document, retry_after)
        result: Document = document
        return result

    async def status(self) -> Document:
        return await self._call("GET", "/v1/status")

    async def effect(self, key: str) -> Document:
        return await self._call("GET", f"/v1/effects/{_segment(key)}")

    async def events(self, agent: str, after: str | None, limit: int) -> Document:
        query = {"after": after or "", "limit": str(limit)}
        return await self._call("GET", f"/v1/agents/{_segment(agent)}/events", query)

    async def batch(self, agent: str, batch: str) -> Document:
        return await self._call("GET", f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}")

    async def recover(self, agent: str, batch: str, mode: str, actor: str, note: str) -> Document:
        path = f"/v1/agents/{_segment(agent)}/batches/{_segment(batch)}/recover"
        body = {"strategy": mode, "actor": actor, "note": note}
        return await self._call("POST", path, body=body)

    async def review(self, agent: str | None, limit: int) -> Document:
        return await self._call("GET", "/v1/review", {"agent": agent or "", "limit": str(limit)})

    async def resolve(
        self,
        key: str,
        verdict: str,
        actor: str,
        note: str,
        external_id: str = "",
        response: Document | None = None,
    ) -> Document:
        body: dict[str, Any] = {"as": verdict, "actor": actor, "note": note}
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

    async def retry(self, key: str, actor: str, note: str) -> Document:
        path = f"/v1/review/{_segment(key)}/retry"
        return await self._call("POST", path, body={"actor": actor, "note": note})

    async def store_status(self) -> Document:
        return await self._call("GET", "/v1/store")

    async def acknowledge_loss(self, actor: str, note: str) -> Document:
        body = {"actor": actor, "note": note}
        return await self._call("POST", "/v1/store/acknowledge-loss", body=body)

    async def duplicates(self, agent: str | None, limit: int) -> Document:
        query = {"agent": agent or "", "limit": str(limit)}
        return await self._call("GET", "/v1/duplicates", query)


def _refusal(status: int, document: Any, retry_after: str) -> RequestRefused:
    """The problem document an error answer carries, as the refusal it stands for."""
    if not isinstance(document, dict):
        document = {}
    code_text = str(document.pop("type", "")).removeprefix(PROBLEM_TYPE_BASE)
    try:
        code = ProblemCode(code_text)
    except ValueError:
        code = ProblemCode.INVALID_REQUEST
    detail = str(document.pop("detail", f"the admin API answered {status}"))
    for name in ("title", "status", "effect_key"):
        document.pop(name, None)
    retry_after_s = int(retry_after) if retry_after.isdigit() else None
    return RequestRefused(code, detail, retry_after_s=retry_after_s, extra=document)
