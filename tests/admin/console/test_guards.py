"""The console's guard chain on its own: who may reach it, under which name, whose forms it
takes, and that a form needs a session and that session's CSRF token. A refused request never
reaches the handler."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, make_mocked_request
from pydantic import SecretStr

from idemproxy.admin.console.guards import reach_guard, session_guard
from idemproxy.admin.console.session import COOKIE, Sessions
from idemproxy.admin.forgery import HostAllowList
from idemproxy.config.settings import ConsoleReach

Client = TestClient[web.Request, web.Application]
SESSIONS = Sessions(SecretStr("admin-token-0123456789"))
HOSTS = HostAllowList(["127.0.0.1", "console.internal"])


class Reached:
    def __init__(self) -> None:
        self.calls = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        return web.Response(text="reached")


def peer(address: str) -> Any:
    transport = mock.Mock()
    transport.get_extra_info.return_value = (address, 40_000)
    return transport


@pytest.mark.parametrize(
    ("reach", "address", "admitted"),
    [
        (ConsoleReach.LOOPBACK, "127.0.0.1", True),
        (ConsoleReach.LOOPBACK, "::1", True),
        (ConsoleReach.LOOPBACK, "10.1.2.3", False),  # the pod network, a Service
        (ConsoleReach.LOOPBACK, "192.168.1.9", False),
        (ConsoleReach.ANY, "10.1.2.3", True),
    ],
)
async def test_loopback_answers_its_own_host_alone(
    reach: ConsoleReach, address: str, admitted: bool
) -> None:
    handler = Reached()
    request = make_mocked_request(
        "GET", "/console/", headers={"Host": "127.0.0.1:9090"}, transport=peer(address)
    )
    response = await reach_guard(reach, HOSTS)(request, handler.handle)
    assert handler.calls == int(admitted)
    if not admitted:
        assert response.status == 403
        assert isinstance(response, web.Response)
        assert response.text is not None
        assert "kubectl port-forward" in response.text
        assert "IDEMPROXY_CONSOLE=any" in response.text


@pytest.mark.parametrize(
    ("method", "headers", "admitted"),
    [
        ("GET", {"Host": "console.internal:9090"}, True),
        ("GET", {"Host": "localhost:9090"}, True),
        ("GET", {"Host": "10.0.0.7:9090"}, True),  # an address cannot be rebound
        ("GET", {"Host": "rebind.attacker.test:9090"}, False),
        # A link followed from another site: no cookie comes with it (SameSite=Strict).
        ("GET", {"Host": "127.0.0.1:9090", "Sec-Fetch-Site": "cross-site"}, True),
        ("POST", {"Host": "127.0.0.1:9090"}, True),  # curl, with the session and its token
        (
            "POST",
            {
                "Host": "127.0.0.1:9090",
                "Origin": "http://127.0.0.1:9090",
                "Sec-Fetch-Site": "same-origin",
            },
            True,
        ),
        ("POST", {"Host": "127.0.0.1:9090", "Origin": "http://evil.test"}, False),
        ("POST", {"Host": "127.0.0.1:9090", "Origin": "null"}, False),
        ("POST", {"Host": "127.0.0.1:9090", "Origin": "http://127.0.0.1:8080"}, False),
        ("POST", {"Host": "127.0.0.1:9090", "Sec-Fetch-Site": "same-site"}, False),
        ("POST", {"Host": "127.0.0.1:9090", "Sec-Fetch-Site": "cross-site"}, False),
        ("POST", {"Host": "127.0.0.1:9090", "Sec-Fetch-Site": "none"}, False),
        ("POST", {"Host": "rebind.attacker.test:9090", "Sec-Fetch-Site": "same-origin"}, False),
    ],
)
async def test_the_host_is_its_own_and_forms_come_from_its_pages(
    method: str, headers: dict[str, str], admitted: bool
) -> None:
    handler = Reached()
    request = make_mocked_request(method, "/console/x", headers=headers, transport=peer("::1"))
    response = await reach_guard(ConsoleReach.LOOPBACK, HOSTS)(request, handler.handle)
    assert handler.calls == int(admitted), response.status
    if not admitted:
        assert response.status == 403
        assert response.headers["Content-Type"].startswith("text/html")


@pytest.fixture
async def guarded(aiohttp_client: Any) -> tuple[Client, Reached]:
    handler = Reached()
    console = web.Application(middlewares=[session_guard(SESSIONS)])
    for path in ("/signin", "/static/console.css", "/page"):
        console.router.add_route("*", path, handler.handle)
    root = web.Application()
    root.add_subapp("/console", console)
    client: Client = await aiohttp_client(root)
    return client, handler


def with_session() -> tuple[dict[str, str], str]:
    session, cookie = SESSIONS.issue()
    return {"Cookie": f"{COOKIE}={cookie}"}, SESSIONS.csrf(session)


async def test_without_a_session_a_page_sends_to_sign_in_and_a_form_is_refused(
    guarded: tuple[Client, Reached],
) -> None:
    client, handler = guarded
    page = await client.get("/console/page", allow_redirects=False)
    assert (page.status, page.headers["Location"]) == (303, "/console/signin")
    form = await client.post("/console/page", data={"csrf": "x"})
    assert form.status == 401
    assert "sign in again" in await form.text()
    forged = await client.get("/console/page", headers={"Cookie": f"{COOKIE}=a.1.b"})
    assert forged.url.path == "/console/signin"
    assert handler.calls == 1  # the redirect's sign-in page, nothing else


async def test_sign_in_and_the_stylesheet_need_no_session(guarded: tuple[Client, Reached]) -> None:
    client, handler = guarded
    assert (await client.get("/console/static/console.css")).status == 200
    assert (await client.post("/console/signin", data={"token": "t"})).status == 200
    assert handler.calls == 2


async def test_a_form_needs_its_sessions_csrf_token(guarded: tuple[Client, Reached]) -> None:
    client, handler = guarded
    cookie, token = with_session()
    _, other_token = with_session()
    for fields in ({}, {"csrf": ""}, {"csrf": other_token}, {"csrf": token + "0"}):
        refused = await client.post("/console/page", data=fields, headers=cookie)
        assert refused.status == 403, fields
        assert "Nothing was changed" in await refused.text()
    assert handler.calls == 0
    done = await client.post("/console/page", data={"csrf": token}, headers=cookie)
    assert done.status == 200
    assert (await client.get("/console/page", headers=cookie)).status == 200
    assert handler.calls == 2


async def test_a_json_body_carries_no_csrf_token_and_is_refused(
    guarded: tuple[Client, Reached],
) -> None:
    client, handler = guarded
    cookie, token = with_session()
    refused = await client.post("/console/page", json={"csrf": token}, headers=cookie)
    assert refused.status == 403
    assert handler.calls == 0
