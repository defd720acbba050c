"""The console mounted on the admin listener: the API's guards are exactly as strict as before
for everything outside /console/ (a console session opens nothing there, a form is still
refused), the console answers by its own rules, and without a token it offers nothing."""

from __future__ import annotations

from idemproxy.admin.console.session import COOKIE
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from tests.admin.conftest import AUTH, TOKEN, AdminClient, AdminFactory
from tests.admin.console.conftest import csrf_of, origin, sign_in
from tests.ledger.conftest import make_effect

PROBLEM = "application/problem+json"


async def test_a_console_session_opens_nothing_of_the_api(
    console: AdminClient, store: MemoryStore
) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    # The cookie is for /console only; sent by hand, it still is no bearer token.
    jar = console.session.cookie_jar.filter_cookies(console.make_url("/console/"))
    cookie = {"Cookie": f"{COOKIE}={jar[COOKIE].value}"}
    status = await console.get("/v1/status", headers=cookie)
    assert (status.status, status.content_type) == (401, PROBLEM)
    token = await csrf_of(console)
    path = f"/v1/review/{str(key).replace('/', '%2F')}/resolution"
    for body in ({"as": "not_applied", "csrf": token}, "as=not_applied"):
        posted = await console.post(path, data=body, headers={**origin(console), **cookie, **AUTH})
        assert posted.status in (403, 415), await posted.text()
        assert posted.content_type == PROBLEM
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.UNKNOWN


async def test_the_api_keeps_its_guards_beside_the_console(admin: AdminClient) -> None:
    assert (await admin.get("/v1/status")).status == 401
    assert (await admin.get("/v1/status", headers=AUTH)).status == 200
    foreign = await admin.get("/v1/status", headers={**AUTH, "Host": "rebind.test"})
    assert foreign.status == 403
    form = await admin.post(
        "/v1/agents/bot/pause", data={"actor": "x"}, headers={**AUTH, **origin(admin)}
    )
    assert form.status == 415
    assert (await admin.get("/healthz")).status == 200


async def test_the_console_answers_in_html_with_its_own_refusals(admin: AdminClient) -> None:
    signin = await admin.get("/console/")
    assert signin.url.path == "/console/signin"
    assert signin.content_type == "text/html"
    # The API's bearer token is no way in: the console has its own sign-in.
    assert (await admin.get("/console/", headers=AUTH, allow_redirects=False)).status == 303
    foreign = await admin.get("/console/signin", headers={"Host": "rebind.test"})
    assert (foreign.status, foreign.content_type) == (403, "text/html")
    css = await admin.get("/console/static/console.css")
    assert (css.status, css.content_type) == (200, "text/css")
    assert "font" in await css.text()


async def test_a_signed_in_console_has_its_own_404(console: AdminClient) -> None:
    missing = await console.get("/console/no/such/page")
    assert (missing.status, missing.content_type) == (404, "text/html")
    plain = await console.get("/console")
    assert (plain.status, plain.url.path) == (200, "/console")


async def test_console_off_answers_nothing(make_admin: AdminFactory) -> None:
    client = await make_admin(admin_token=TOKEN, console="off")
    for path in ("/console/", "/console/signin"):
        response = await client.get(path, headers=AUTH)
        assert response.status == 404
        assert "console" not in await response.text()
    assert (await sign_in(client)).status in (401, 403, 415)


async def test_without_an_admin_token_the_console_says_it_needs_one(
    make_admin: AdminFactory,
) -> None:
    client = await make_admin()
    for path in ("/console", "/console/", "/console/signin", "/console/agents/bot"):
        page = await client.get(path)
        text = await page.text()
        assert (page.status, page.content_type) == (503, "text/html")
        assert "IDEMPROXY_ADMIN_TOKEN" in text
        assert "<form" not in text
    signin = await client.post("/console/signin", data={"token": ""}, headers=origin(client))
    assert signin.status == 503
    # The API on loopback without a token is as open to local processes as it was.
    assert (await client.get("/v1/status")).status == 200
