"""Credentials sent through the proxy end up nowhere: store, logs, metrics or events.

Requests carry credentials in ``Authorization``, ``Cookie``, ``Proxy-Authorization`` and
API-key headers, through every path the proxy has: forwarded, replayed, refused, upstream
failures (500, 429, a dropped connection, a timeout), an unknown outcome and a malformed
request. The proxy logs at debug level. Then the SQLite file, everything in Redis, the proxy's
log, ``/metrics`` and the outbox events are searched for every credential.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import redis

from idemproxy.store.factory import open_store
from tests.support.processes import FakeUpstream, RedisServer, ServedProxy, http_get, running
from tests.support.rawhttp import exchange, request_bytes

pytestmark = pytest.mark.e2e

AGENT = "secrets-agent"


@pytest.fixture
def secrets() -> dict[str, str]:
    token = uuid.uuid4().hex
    return {
        "Authorization": f"Bearer sk-live-auth-{token}",
        "Cookie": f"sid=cookie-{token}; theme=dark",
        "Proxy-Authorization": f"Basic proxy-{token}",
        "X-Api-Key": f"xapikey-{token}",
        "Api-Key": f"apikey-{token}",
        "X-Goog-Api-Key": f"goog-{token}",
        "X-Auth-Token": f"authtoken-{token}",
    }


def credentials(secrets: dict[str, str]) -> list[bytes]:
    """The parts of each header value that are secret."""
    parts = [value.split(" ")[-1].split(";")[0].removeprefix("sid=") for value in secrets.values()]
    return [part.encode() for part in parts]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    with running(server):
        yield server


def redis_contents(port: int) -> bytes:
    """Every key and value in the server, read back through commands (the RDB compresses)."""
    client = redis.Redis(port=port)
    dumped: list[bytes] = []
    try:
        for key in client.scan_iter():
            kind = client.type(key)
            if kind == b"hash":
                value: object = client.hgetall(key)
            elif kind == b"stream":
                value = client.xrange(key)
            elif kind == b"zset":
                value = client.zrange(key, 0, -1)
            elif kind == b"set":
                value = client.smembers(key)
            elif kind == b"list":
                value = client.lrange(key, 0, -1)
            else:
                value = client.get(key)
            dumped.append(key + repr(value).encode())
    finally:
        client.close()
    assert dumped, "the run stored nothing in Redis"
    return b"\n".join(dumped)


def sqlite_contents(path: Path) -> bytes:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


async def drive(proxy: ServedProxy, secrets: dict[str, str]) -> None:
    """Send the credentials down every path the proxy has."""
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for index, path in enumerate(
            ["/up/messages", "/up/messages", "/up/status/500", "/up/status/500",
             "/up/status/429", "/up/drop", "/up/hang", "/up/sse?events=3"]
        ):  # fmt: skip
            headers = {**secrets, "Idem-Agent": AGENT, "Idem-Batch": "b1"}
            headers["Idem-Tool-Call"] = f"c{index}" if path != "/up/messages" else "c0"
            async with session.post(proxy.url + path, data=b'{"a":1}', headers=headers) as answer:
                await answer.read()
        refusals = [
            {"Idem-Agent": AGENT, "Idem-Batch": "b1"},  # no tool call: 400
            {"Idem-Agent": AGENT, "Idempotency-Key": '"bad'},  # invalid key: 400
        ]
        for extra in refusals:
            async with session.post(
                proxy.url + "/up/messages", data=b"{}", headers={**secrets, **extra}
            ) as answer:
                assert answer.status == 400
        async with session.get(proxy.url + "/up/headers", headers=secrets) as answer:
            echoed = await answer.read()
            assert secrets["X-Api-Key"].encode() in echoed  # the upstream does get them
    too_long: list[tuple[str | bytes, str | bytes]] = [
        ("Authorization", secrets["Authorization"] + "x" * 9000)
    ]
    exchange(proxy.port, request_bytes("POST", "/up/messages", too_long, b"{}"))


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_no_credential_reaches_store_logs_metrics_or_events(
    tmp_path: Path, secrets: dict[str, str], backend: str, request: pytest.FixtureRequest
) -> None:
    db = tmp_path / "effects.db"
    if backend == "redis":
        store_url = request.getfixturevalue("redis_server").url
    else:
        store_url = f"sqlite:///{db}"
    upstream = FakeUpstream(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"upstreams:\n  up: {{url: '{upstream.url}/api', read_timeout_s: 1}}\nlog_level: debug\n"
    )
    proxy = ServedProxy(tmp_path, "--config", str(config), "--store", store_url)
    with running(upstream, proxy):
        await drive(proxy, secrets)
        _, metrics = http_get(proxy.admin_url + "/metrics")
    store = open_store(store_url)
    try:
        events = repr(await store.read_events(AGENT, limit=1000)).encode()
    finally:
        await store.close()
    if backend == "redis":
        stored = redis_contents(int(store_url.split(":")[2].split("/")[0]))
    else:
        stored = sqlite_contents(db)
    sinks = {"store": stored, "log": proxy.output().encode(), "metrics": metrics, "events": events}

    # Each sink holds what the run did (so a search can find things in it) ...
    assert b"effect.completed" in events
    assert b"effect.unknown" in events
    assert b"/messages" in stored
    assert b"malformed request refused" in sinks["log"]
    assert b"idemproxy_requests_total" in metrics
    # ... and no credential, nor the upstream's session cookie.
    for name, content in sinks.items():
        for secret in [*credentials(secrets), b"session=secret"]:
            assert secret not in content, f"{secret!r} found in the {name}"
