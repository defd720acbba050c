"""`idemproxy serve` as a process, against a fake upstream process that counts its effects."""

from __future__ import annotations

import asyncio
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import redis

from tests.support.fleet import DurableRedis
from tests.support.processes import (
    FakeUpstream,
    RedisServer,
    ServedProxy,
    http_get,
    running,
)

pytestmark = pytest.mark.e2e

TOOL_CALL = {"Idem-Batch": "batch-7", "Idem-Tool-Call": "call-1"}
SECRET = "Bearer sk-live-e2e-secret-0123456789"
LEASE_MS = 1000


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[FakeUpstream]:
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        yield upstream


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: e2e\nroutes:\n  - name: read\n    match: {methods: GET}\n    effect: safe\n"
        f"default: {{name: write, lease_ms: {LEASE_MS}, coalesce_wait_ms: 3000}}\n"
    )
    return path


def proxy_for(tmp_path: Path, upstream: FakeUpstream, store: str, policy: Path) -> ServedProxy:
    return ServedProxy.for_upstream(tmp_path, f"{upstream.url}/api", policy, store)


Answer = tuple[int, dict[str, str], bytes]


async def post(url: str, path: str, headers: dict[str, str], body: bytes = b"{}") -> Answer:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + path, data=body, headers=headers) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def test_hundred_concurrent_requests_one_effect_then_byte_identical_replay(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    proxy = proxy_for(tmp_path, upstream, f"sqlite:///{tmp_path}/store.db", policy)
    with running(proxy):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)) as session:

            async def call() -> tuple[int, bytes]:
                async with session.post(
                    f"{proxy.url}/up/slow?ms=300", data=b'{"text":"hi"}', headers=TOOL_CALL
                ) as response:
                    return response.status, await response.read()

            results = await asyncio.gather(*(call() for _ in range(100)))
        status, headers, replay = await post(
            proxy.url, "/up/slow?ms=300", TOOL_CALL, b'{"text":"hi"}'
        )

    assert len(upstream.effects("/slow")) == 1
    assert {status for status, _ in results} == {200}
    assert len({body for _, body in results}) == 1
    assert status == 200
    assert headers["Idem-Outcome"] == "replayed"
    assert replay == results[0][1]


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_proxy_killed_while_upstream_holds_request_answers_outcome_unknown(
    tmp_path: Path, upstream: FakeUpstream, policy: Path, backend: str
) -> None:
    redis_server = RedisServer(tmp_path)
    with running(redis_server):
        store = redis_server.url if backend == "redis" else f"sqlite:///{tmp_path}/store.db"
        proxy = proxy_for(tmp_path, upstream, store, policy)
        with running(proxy):
            pending = asyncio.create_task(post(proxy.url, "/up/hang", TOOL_CALL))
            for _ in range(100):
                if upstream.effects("/hang"):
                    break
                await asyncio.sleep(0.05)
            assert len(upstream.effects("/hang")) == 1
            proxy.kill()
            with pytest.raises(aiohttp.ClientError):
                await pending

        restarted = proxy_for(tmp_path, upstream, store, policy)
        with running(restarted):
            await asyncio.sleep(LEASE_MS / 1000 + 0.3)
            status, headers, body = await post(restarted.url, "/up/hang", TOOL_CALL)

    assert status == 409
    assert headers["Idem-Outcome"] == "outcome-unknown"
    assert b"lease expired" in body
    assert len(upstream.effects("/hang")) == 1


async def test_redis_stopped_gives_503_and_no_effect_then_recovers(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    # It comes back with its data: one that came back empty would have lost records, and the
    # proxy would refuse effects until an operator said so (tests/e2e/test_store_safety.py).
    redis_server = DurableRedis(tmp_path)
    with running(redis_server):
        proxy = proxy_for(tmp_path, upstream, redis_server.url, policy)
        with running(proxy):
            assert http_get(proxy.admin_url + "/readyz")[0] == 200
            redis_server.stop()
            started = time.monotonic()
            status, headers, _ = await post(proxy.url, "/up/messages", TOOL_CALL)
            took_s = time.monotonic() - started
            ready_status, ready_body = http_get(proxy.admin_url + "/readyz")

            assert status == 503
            assert headers["Idem-Outcome"] == "store-unavailable"
            assert headers["Retry-After"] == "1"
            assert took_s < 5
            assert ready_status == 503
            assert b"unreachable" in ready_body
            assert upstream.effects() == []

            redis_server.start()
            for _ in range(50):
                status, headers, _ = await post(proxy.url, "/up/messages", TOOL_CALL)
                if status == 200:
                    break
                await asyncio.sleep(0.2)
            assert status == 200
            assert http_get(proxy.admin_url + "/readyz")[0] == 200
    assert len(upstream.effects("/messages")) == 1


async def test_safe_reads_still_pass_while_the_store_is_down(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    proxy = proxy_for(tmp_path, upstream, "redis://127.0.0.1:1/0", policy)
    with running(proxy):
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{proxy.url}/up/headers") as response,
        ):
            assert response.status == 200
        status, _, _ = await post(proxy.url, "/up/messages", TOOL_CALL)
    assert status == 503
    assert upstream.effects("/messages") == []


async def test_sse_stream_is_replayed_identically(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    proxy = proxy_for(tmp_path, upstream, f"sqlite:///{tmp_path}/store.db", policy)
    with running(proxy):
        first = await post(proxy.url, "/up/sse?events=20&gap_ms=10", TOOL_CALL)
        again = await post(proxy.url, "/up/sse?events=20&gap_ms=10", TOOL_CALL)
    assert first[0] == again[0] == 200
    assert first[2] == again[2]
    assert first[2].count(b"data:") == 21
    assert again[1]["Content-Type"] == "text/event-stream"
    assert again[1]["Idem-Outcome"] == "replayed"
    assert len(upstream.effects("/sse")) == 1


async def test_no_credential_is_stored_in_sqlite_or_redis(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    redis_server = RedisServer(tmp_path)
    db = tmp_path / "secrets.db"
    headers = {
        **TOOL_CALL,
        "Authorization": SECRET,
        "Cookie": "sid=cookie-secret-42",
        "X-Api-Key": "api-key-secret-43",
    }
    with running(redis_server):
        for store in (f"sqlite:///{db}", redis_server.url):
            proxy = proxy_for(tmp_path, upstream, store, policy)
            with running(proxy):
                assert (await post(proxy.url, "/up/messages", headers))[0] == 200
                assert (await post(proxy.url, "/up/status/500", headers))[0] == 500
        client = redis.Redis(port=redis_server.port)
        dumped = b"".join(
            b"".join(f"{k!r}{v!r}".encode() for k, v in client.hgetall(key).items())
            if client.type(key) == b"hash"
            else repr(client.dump(key)).encode()
            for key in client.scan_iter()
        )
        client.close()
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA wal_checkpoint(FULL)")
    stored = db.read_bytes() + dumped
    assert b"messages" in stored  # the records are there ...
    secrets = (b"sk-live-e2e-secret", b"cookie-secret-42", b"api-key-secret-43", b"session=secret")
    for secret in secrets:
        assert secret not in stored  # ... their credentials are not
    assert any(e["path"].endswith("/messages") for e in upstream.effects())


async def test_store_down_at_start_up_is_not_a_config_error(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    redis_server = RedisServer(tmp_path)
    proxy = proxy_for(tmp_path, upstream, redis_server.url, policy)
    with running(proxy):
        status, body = http_get(proxy.admin_url + "/readyz")
        assert status == 503
        assert b"unreachable" in body
        assert http_get(proxy.admin_url + "/healthz")[0] == 200
        with running(redis_server):
            assert http_get(proxy.admin_url + "/readyz")[0] == 200
            assert (await post(proxy.url, "/up/messages", TOOL_CALL))[0] == 200


async def test_sigterm_lets_in_flight_effects_finish_and_record(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    store = f"sqlite:///{tmp_path}/store.db"
    proxy = proxy_for(tmp_path, upstream, store, policy)
    with running(proxy):
        pending = asyncio.create_task(post(proxy.url, "/up/slow?ms=800", TOOL_CALL))
        await asyncio.sleep(0.3)
        proxy.signal(signal.SIGTERM)
        status, _, body = await pending
        assert proxy.wait() == 0
    assert status == 200
    restarted = proxy_for(tmp_path, upstream, store, policy)
    with running(restarted):
        again = await post(restarted.url, "/up/slow?ms=800", TOOL_CALL)
    assert again[1]["Idem-Outcome"] == "replayed"
    assert again[2] == body
    assert len(upstream.effects("/slow")) == 1


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("upstreams:\n  up: {url: 'http://127.0.0.1:1', timeout: 3}\n")
    proxy = ServedProxy(tmp_path, "--config", str(config))
    result = subprocess.run(proxy.args, capture_output=True, text=True, timeout=30, env=proxy.env)
    assert result.returncode == 2
    assert "upstreams.up.timeout" in result.stderr
    assert str(config) in result.stderr
    assert "Traceback" not in result.stderr


def test_a_port_in_use_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    proxy = ServedProxy(tmp_path, "--store", "memory://")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", proxy.port))
        taken.listen()
        result = subprocess.run(
            proxy.args, capture_output=True, text=True, timeout=30, env=proxy.env
        )
    assert result.returncode == 2
    assert "cannot listen" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("path", ["/up/hang", "/up/sse?events=1000&gap_ms=100"])
async def test_sigterm_ends_within_the_shutdown_timeout_and_records_the_abandoned_effect(
    tmp_path: Path, upstream: FakeUpstream, policy: Path, path: str
) -> None:
    store = f"sqlite:///{tmp_path}/store.db"
    shutdown_timeout_s = 2.0
    shutdown = {"IDEMPROXY_SHUTDOWN_TIMEOUT_S": str(shutdown_timeout_s)}
    proxy = ServedProxy.for_upstream(tmp_path, f"{upstream.url}/api", policy, store, shutdown)
    with running(proxy):
        pending = asyncio.create_task(post(proxy.url, path, TOOL_CALL))
        for _ in range(100):
            if upstream.effects(path.split("?")[0].removeprefix("/up")):
                break
            await asyncio.sleep(0.05)
        started = time.monotonic()
        proxy.signal(signal.SIGTERM)
        assert proxy.wait() == 0
        stopped_s = time.monotonic() - started
        pending.cancel()
    # The chart's grace period counts shutdown_timeout_s once (and 5 s to spare).
    assert stopped_s < shutdown_timeout_s + 1.5
    with sqlite3.connect(f"{tmp_path}/store.db") as db:
        states = [row[0] for row in db.execute("SELECT state FROM records")]
    assert states == ["unknown"]


async def test_sigterm_does_not_wait_for_an_idle_event_stream(
    tmp_path: Path, upstream: FakeUpstream, policy: Path
) -> None:
    """An MCP session's GET stream (or any safe event stream) writes only when the server has
    something to say: its client may be long gone. It records nothing, so shutdown ends it at
    once instead of holding the whole shutdown timeout for it."""
    shutdown_timeout_s = 10.0
    shutdown = {"IDEMPROXY_SHUTDOWN_TIMEOUT_S": str(shutdown_timeout_s)}
    store = f"sqlite:///{tmp_path}/store.db"
    proxy = ServedProxy.for_upstream(tmp_path, f"{upstream.url}/api", policy, store, shutdown)
    with running(proxy):
        async with aiohttp.ClientSession() as session:
            stream = await session.get(f"{proxy.url}/up/sse?events=2&gap_ms=60000")
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            await stream.content.readany()  # the stream is open and idle
            started = time.monotonic()
            proxy.signal(signal.SIGTERM)
            assert proxy.wait() == 0
            stopped_s = time.monotonic() - started
            stream.close()
    assert stopped_s < shutdown_timeout_s / 2
