"""What a web page can make a browser send to the admin API, refused with nothing changed.

Without a token the admin API is open to local processes, and a browser on the same host is
one. A page cannot set ``Authorization`` or send ``application/json`` across origins without a
preflight, but it can send "simple" requests (``text/plain``, forms) with its ``Origin``, and
with DNS rebinding it can address the listener under a name of its own (a foreign ``Host``)
and read the answers. Each is refused here before anything is read or changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.admin.forgery import HostAllowList
from idemproxy.config.loader import load_config
from idemproxy.errors import ConfigError
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.admin.conftest import AUTH, AdminClient, AdminFactory
from tests.ledger.conftest import make_effect

PROBLEM = "application/problem+json"
PAUSE = "/v1/agents/bot/pause"
EVIL = "https://evil.example"


def resolution(key: RecordKey) -> str:
    return f"/v1/review/{quote(str(key), safe='')}/resolution"


async def problem_code(response: Any) -> str:
    assert response.content_type == PROBLEM
    document = await response.json()
    assert document["detail"]
    return str(document["type"]).rsplit("/", 1)[1]


async def assert_untouched(store: MemoryStore, key: RecordKey) -> None:
    """No pause, the review item still unknown, and no audit entry: nothing was done."""
    assert (await store.read_control("bot")).pause is None
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.UNKNOWN
    assert await store.read_audit("bot") == []


@pytest.fixture
async def open_admin(make_admin: AdminFactory) -> AdminClient:
    """The tokenless loopback admin API: the one a web page on the same host can reach."""
    return await make_admin()


@pytest.mark.parametrize(
    "forged",
    [
        # fetch(..., {mode: "no-cors", method: "POST", body: "{...}"}): text/plain, an Origin.
        {"headers": {"Content-Type": "text/plain", "Origin": EVIL}},
        # The same, from a browser that sends fetch metadata as well.
        {"headers": {"Content-Type": "text/plain", "Origin": EVIL, "Sec-Fetch-Site": "cross-site"}},
        # A <form method=post> on another port of this host: same site, not same origin.
        {
            "headers": {
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": "http://127.0.0.1:8000",
                "Sec-Fetch-Site": "same-site",
            }
        },
        # A sandboxed iframe or a file:// page says Origin: null.
        {"headers": {"Content-Type": "text/plain", "Origin": "null"}},
        # Fetch metadata alone (a browser that left Origin out) is enough to tell.
        {"headers": {"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}},
        # A JSON body that somehow got past the preflight still carries its Origin.
        {"headers": {"Content-Type": "application/json", "Origin": EVIL}},
    ],
    ids=["no-cors-fetch", "fetch-metadata", "form-post", "origin-null", "sec-fetch-only", "json"],
)
async def test_cross_origin_posts_are_refused_and_change_nothing(
    open_admin: AdminClient, store: MemoryStore, forged: dict[str, Any]
) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    body = b'{"as": "not_applied", "actor": "mallory", "note": "x"}'

    for path in (PAUSE, resolution(key)):
        response = await open_admin.post(path, data=body, **forged)
        assert response.status == 403, path
        assert await problem_code(response) == "cross-origin-request"

    await assert_untouched(store, key)


async def test_a_cross_origin_read_is_refused(open_admin: AdminClient, store: MemoryStore) -> None:
    await make_effect(store, "bot", "secret-batch", "c1", RecordState.UNKNOWN)

    response = await open_admin.get(
        "/v1/review", headers={"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
    )

    assert response.status == 403
    assert "secret-batch" not in await response.text()


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:9090", "rebind.127.0.0.1.nip.io", "localhost.evil.example"],
)
async def test_a_foreign_host_reads_nothing_and_changes_nothing(
    open_admin: AdminClient, store: MemoryStore, host: str
) -> None:
    """DNS rebinding: the page's own name now points at 127.0.0.1, so its requests are
    same-origin to the browser, and only the Host header tells them apart."""
    key = await make_effect(store, "bot", "secret-batch", "c1", RecordState.UNKNOWN)
    own_origin = {"Host": host, "Origin": f"http://{host}"}

    read = await open_admin.get("/v1/review", headers={"Host": host})
    pause = await open_admin.post(PAUSE, json={"actor": "mallory"}, headers=own_origin)
    verdict = {"as": "not_applied", "actor": "mallory"}
    resolve = await open_admin.post(resolution(key), json=verdict, headers=own_origin)

    for response in (read, pause, resolve):
        assert response.status == 403
        assert await problem_code(response) == "foreign-host"
        text = await response.text()
        assert "secret-batch" not in text
        assert "admin_hosts" in text  # the detail names the setting that would allow it
    await assert_untouched(store, key)


async def test_a_foreign_host_is_refused_with_the_token_too(
    admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "secret-batch", "c1", RecordState.UNKNOWN)

    response = await admin.get("/v1/review", headers={**AUTH, "Host": "evil.example"})

    assert response.status == 403
    assert "secret-batch" not in await response.text()


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:19090", "localhost:9090", "LOCALHOST", "[::1]:9090", "10.0.0.7:9090"],
)
async def test_addresses_and_localhost_are_the_admin_listeners_own(
    open_admin: AdminClient, host: str
) -> None:
    """An IP address cannot be rebound to another host, and localhost is this host: a
    port-forward or a tunnel on another port is fine."""
    response = await open_admin.get("/v1/status", headers={"Host": host})
    assert response.status == 200, await response.text()


async def test_names_in_admin_hosts_are_accepted(make_admin: AdminFactory) -> None:
    admin = await make_admin(admin_hosts="idemproxy-admin.tools.svc, Ops.Example")

    for host in ("idemproxy-admin.tools.svc:9090", "ops.example", "ops.example."):
        assert (await admin.get("/v1/status", headers={"Host": host})).status == 200, host
    assert (await admin.get("/v1/status", headers={"Host": "other.example"})).status == 403


LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


@given(
    labels=st.lists(LABEL, min_size=1, max_size=4).filter(
        lambda labels: not all(label.isdigit() for label in labels)  # not an address
    ),
    port=st.none() | st.integers(1, 65535),
    upper=st.booleans(),
    trailing_dot=st.booleans(),
)
def test_no_name_but_those_listed_passes_whatever_its_spelling(
    labels: list[str], port: int | None, upper: bool, trailing_dot: bool
) -> None:
    name = ".".join(labels)
    host = (name.upper() if upper else name) + ("." if trailing_dot else "")
    host += "" if port is None else f":{port}"

    admitted = HostAllowList(["Ops.Example"]).admits(host)

    assert admitted is (name in {"localhost", "ops.example"})


@pytest.mark.parametrize("entry", ["http://ops.example", "ops.example:9090", "ops example", "-x"])
def test_admin_hosts_are_names_alone(entry: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(environ={"IDEMPROXY_ADMIN_HOSTS": f"ops.example,{entry}"})
    message = str(refused.value)
    assert "IDEMPROXY_ADMIN_HOSTS" in message
    assert "without scheme or port" in message


def test_admin_hosts_from_a_file_or_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("admin_hosts: [Ops.Example., idemproxy-admin.tools.svc]\n")
    assert load_config(config, environ={}).config.admin_hosts == (
        "ops.example", "idemproxy-admin.tools.svc",
    )  # fmt: skip
    assert load_config(environ={"IDEMPROXY_ADMIN_HOSTS": ""}).config.admin_hosts == ()


async def test_the_listeners_own_origin_may_post(
    open_admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    host = f"127.0.0.1:{open_admin.port}"
    own = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}

    response = await open_admin.post(PAUSE, json={"actor": "alice"}, headers=own)

    assert response.status == 200, await response.text()


async def test_a_typed_address_is_a_navigation_and_may_read(open_admin: AdminClient) -> None:
    # What a browser sends when an operator types the URL: no Origin, Sec-Fetch-Site: none.
    response = await open_admin.get("/v1/status", headers={"Sec-Fetch-Site": "none"})
    assert response.status == 200


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (None, b""),  # curl -X POST with no body
        ("text/plain", b'{"actor": "alice"}'),
        ("application/x-www-form-urlencoded", b"actor=alice"),
        ("multipart/form-data; boundary=x", b"--x--"),
        ("application/jsonp", b'{"actor": "alice"}'),
    ],
)
async def test_posts_take_json_alone(
    open_admin: AdminClient, store: MemoryStore, content_type: str | None, body: bytes
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    headers = {} if content_type is None else {"Content-Type": content_type}

    response = await open_admin.post(PAUSE, data=body, headers=headers)

    assert response.status == 415
    assert response.headers["Accept"] == "application/json"
    assert await problem_code(response) == "unsupported-media-type"
    assert "Content-Type: application/json" in (await response.json())["detail"]
    assert (await store.read_control("bot")).pause is None


async def test_json_with_a_charset_or_an_empty_object_is_json(
    open_admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    json_utf8 = {"Content-Type": "application/json; charset=utf-8"}

    paused = await open_admin.post(PAUSE, data=b'{"actor": "alice"}', headers=json_utf8)
    resumed = await open_admin.post("/v1/agents/bot/resume", json={})

    assert (paused.status, resumed.status) == (200, 200)


async def test_a_post_without_the_token_is_401_whatever_its_type(admin: AdminClient) -> None:
    """The token comes first: a caller without it learns nothing, not even what to send."""
    response = await admin.post(PAUSE, data=b"x", headers={"Content-Type": "text/plain"})
    assert response.status == 401


async def test_probes_stay_open_to_any_host_and_origin(admin: AdminClient) -> None:
    """The kubelet probes the pod's address, and Prometheus scrapes by it."""
    browser = {"Host": "evil.example", "Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await admin.get(path, headers=browser)).status == 200, path


async def test_a_preflight_is_not_answered_with_cors_permission(open_admin: AdminClient) -> None:
    """A page's JSON POST needs the browser's preflight to succeed first; it never does."""
    preflight = {
        "Origin": EVIL,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    response = await open_admin.options(PAUSE, headers=preflight)
    assert response.status >= 400
    assert "Access-Control-Allow-Origin" not in response.headers


async def test_a_pod_without_a_token_is_warned_about(
    make_admin: AdminFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """In a pod the agent shares loopback: without a token it could resolve its own reviews."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    await make_admin(admin_token="admin-token-0123456789")
    assert not [r for r in caplog.records if "admin_token" in r.getMessage()]

    await make_admin()

    [warning] = [r for r in caplog.records if "admin_token" in r.getMessage()]
    assert warning.levelname == "WARNING"
    assert "IDEMPROXY_ADMIN_TOKEN" in warning.getMessage()
