"""The console in process: the admin app with a token over a memory store, and a browser-like
client that signs in and reads the CSRF token its pages carry."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import ClientResponse

from idemproxy.store.approvals import Approval, HoldRequest
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectMeta, RecordKey
from tests.admin.conftest import TOKEN, AdminClient, AdminFactory

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def origin(client: AdminClient) -> dict[str, str]:
    """What a browser sends with a form posted by a console page."""
    host = f"{client.host}:{client.port}"
    return {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}


async def csrf_of(client: AdminClient, path: str = "/console/") -> str:
    page = await client.get(path)
    assert page.status == 200, await page.text()
    found = CSRF.search(await page.text())
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


async def sign_in(client: AdminClient, token: str = TOKEN) -> ClientResponse:
    return await client.post(
        "/console/signin", data={"token": token}, headers=origin(client), allow_redirects=False
    )


async def post_form(
    client: AdminClient, path: str, fields: dict[str, str], **kwargs: Any
) -> ClientResponse:
    """A form of a console page, with the session's CSRF token, as the browser posts it."""
    data = {"csrf": await csrf_of(client), **fields}
    return await client.post(
        path, data=data, headers=origin(client), allow_redirects=False, **kwargs
    )


@pytest.fixture
async def console(make_admin: AdminFactory) -> AdminClient:
    """A signed-in console on an admin listener with :data:`TOKEN`."""
    client = await make_admin(admin_token=TOKEN)
    signed = await sign_in(client)
    assert signed.status == 303, await signed.text()
    return client


async def held(store: Store, agent: str = "billing-bot", call: str = "c1") -> Approval:
    """A charge held for approval, as the proxy holds one: awaiting a decision."""
    key = RecordKey(agent, f"tc:b1:{call}:r-create_charge")
    meta = EffectMeta("b1", call, "create_charge", "stripe", "POST", "/v1/charges")
    summary = '{"method": "POST", "body": {"amount": "25000", "currency": "usd"}}'
    request = HoldRequest(
        key, "fp-" + call, meta, "/amount above 10000", summary, 86_400_000, 900_000
    )
    return await store.hold(request)
