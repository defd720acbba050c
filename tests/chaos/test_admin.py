"""The admin surface: locked without its token, and never exposed without one.

A served proxy with an admin token holds a completed effect and one in review. Every admin API
route, asked without the token or with a wrong one (or by path tricks), answers 401 and says
nothing about the records; the attempted changes change nothing; with the token the same
routes work, so there was something to leak. A non-loopback admin listener without a usable
token refuses to start.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import aiohttp
import orjson
import pytest

from tests.support.processes import FakeUpstream, ServedProxy, free_port, running

pytestmark = pytest.mark.e2e

TOKEN = "admin-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a0c1e"
AGENT = "agent-adm-1234"
BATCH = "batch-adm-5678"
Route = tuple[str, str, dict[str, str] | None]


@dataclass
class Admin:
    proxy: ServedProxy
    unknown_key: str

    def routes(self) -> list[Route]:
        key = quote(self.unknown_key, safe="")
        agent = f"/v1/agents/{AGENT}"
        return [
            ("GET", "/v1/status", None),
            ("GET", f"/v1/effects/{key}", None),
            ("GET", "/v1/review", None),
            ("GET", f"/v1/review?agent={AGENT}", None),
            ("GET", f"/v1/review/{key}", None),
            ("GET", "/v1/delivery", None),
            ("GET", f"{agent}/events", None),
            ("GET", f"{agent}/audit", None),
            ("GET", f"{agent}/batches/{BATCH}", None),
            ("POST", f"/v1/review/{key}/resolution", {"as": "not-applied", "note": "x"}),
            ("POST", f"{agent}/delivery/retry", {}),
            ("POST", f"{agent}/batches/{BATCH}/recover", {"strategy": "abandon"}),
            ("GET", "/v1/no-such-route", None),
        ]


async def call(
    admin: Admin, method: str, path: str, body: dict[str, str] | None, auth: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            admin.proxy.admin_url + path,
            data=orjson.dumps(body) if body is not None else None,
            headers={**auth, **({"Content-Type": "application/json"} if body is not None else {})},
        ) as response,
    ):
        return response.status, dict(response.headers), await response.read()


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[Admin]:
    upstream = FakeUpstream(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"upstreams:\n  up: {{url: '{upstream.url}/api', read_timeout_s: 1}}\n")
    proxy = ServedProxy(
        tmp_path,
        "--config", str(config),
        "--store", f"sqlite:///{tmp_path / 'effects.db'}",
        env={"IDEMPROXY_ADMIN_TOKEN": TOKEN},
    )  # fmt: skip
    with running(upstream, proxy):
        yield Admin(proxy, unknown_key="")


async def make_records(admin: Admin) -> None:
    """One completed effect and one whose outcome is unknown (the upstream never answered)."""
    headers = {"Idem-Agent": AGENT, "Idem-Batch": BATCH}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            admin.proxy.url + "/up/messages", headers={**headers, "Idem-Tool-Call": "c1"}
        ) as done:
            assert done.status == 200
        async with session.post(
            admin.proxy.url + "/up/hang", headers={**headers, "Idem-Tool-Call": "c2"}
        ) as timed_out:
            assert timed_out.status == 504
            admin.unknown_key = timed_out.headers["Idem-Key"]


WRONG_AUTH = [
    {},
    {"Authorization": "Bearer wrong"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": TOKEN},
    {"X-Admin-Token": TOKEN},
    {"Cookie": f"token={TOKEN}"},
]


async def test_without_the_token_nothing_is_readable_or_changeable(admin: Admin) -> None:
    await make_records(admin)
    leaks = [AGENT.encode(), BATCH.encode(), admin.unknown_key.encode(), b"c2", b"/hang"]
    for method, path, body in admin.routes():
        for auth in WRONG_AUTH:
            status, headers, text = await call(admin, method, path, body, auth)
            assert status == 401, (method, path, auth)
            assert headers["WWW-Authenticate"].startswith("Bearer")
            assert headers["Content-Type"] == "application/problem+json"
            assert not any(leak in text for leak in leaks), (path, text)
        status, _, _ = await call(admin, method, path + f"?access_token={TOKEN}", body, {})
        assert status == 401
    for trick in ["/healthz/../v1/review", "/metrics/..%2fv1/review", "//v1/review", "/v1/review/"]:
        status, _, text = await call(admin, "GET", trick, None, {})
        assert status in (401, 404), trick
        assert AGENT.encode() not in text
    # The probes and the scrape stay open, and say nothing about records either.
    for path in ("/healthz", "/readyz", "/metrics"):
        status, _, text = await call(admin, "GET", path, None, {})
        assert status == 200
        # The per-agent series (failed effects, time in error, paused, duplicates) carry the
        # agent id as their bounded ``agent`` label: the scrape names agents, never records.
        said = leaks[1:] if path == "/metrics" else leaks
        assert not any(leak in text for leak in said), path

    # Nothing changed, and with the token the same routes show what was there to leak.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    review_path = f"/v1/review/{quote(admin.unknown_key, safe='')}"
    status, _, text = await call(admin, "GET", review_path, None, bearer)
    assert status == 200
    assert orjson.loads(text)["state"] == "unknown"
    status, _, text = await call(admin, "GET", f"/v1/agents/{AGENT}/audit", None, bearer)
    assert status == 200
    assert orjson.loads(text)["entries"] == []  # no resolution, recovery or retry happened
    status, _, text = await call(admin, "GET", f"/v1/agents/{AGENT}/batches/{BATCH}", None, bearer)
    assert status == 200
    assert BATCH.encode() in text
    # With the token a change goes through, and the audit log shows it.
    verdict = {"as": "not-applied", "note": "checked"}
    status, _, _ = await call(admin, "POST", review_path + "/resolution", verdict, bearer)
    assert status == 200
    status, _, text = await call(admin, "GET", f"/v1/agents/{AGENT}/audit", None, bearer)
    assert len(orjson.loads(text)["entries"]) == 1


def nothing_listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    ("host", "token"),
    [
        ("0.0.0.0", None),
        ("[::]", None),
        ("10.1.2.3", None),
        ("admin.example.com", None),
        ("0.0.0.0", ""),  # set but empty, as from a Secret whose key is missing
        ("0.0.0.0", "  padded-token-0123456789  "),  # blanks no client can send
    ],
)
def test_a_non_loopback_admin_listener_without_a_usable_token_refuses_to_start(
    tmp_path: Path, host: str, token: str | None
) -> None:
    port = free_port()
    env = {} if token is None else {"IDEMPROXY_ADMIN_TOKEN": token}
    proxy = ServedProxy(
        tmp_path, "--upstream", "up=http://127.0.0.1:9", "--store", "memory://", env=env
    )
    args = [*proxy.args, "--admin-listen", f"{host}:{port}"]
    result = subprocess.run(args, capture_output=True, text=True, timeout=30, env=proxy.env)
    assert result.returncode == 2
    assert "admin" in result.stderr
    assert "IDEMPROXY_ADMIN_TOKEN" in result.stderr or "admin token" in result.stderr
    assert "Traceback" not in result.stderr
    assert nothing_listens(port)
    assert nothing_listens(proxy.port)
