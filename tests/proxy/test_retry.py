"""Safe routes are retried with bounded full-jitter backoff; effects never are."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.config.loader import load_config
from idemproxy.metrics import Metrics
from idemproxy.policies.route import RetryPolicy
from idemproxy.proxy.app import build_proxy_app
from idemproxy.proxy.retry import backoff_s, delay_before_retry_s, retry_after_s
from idemproxy.server import build_state
from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyTestServer

POLICY = """
name: flaky
routes:
  - name: read
    match: {methods: [GET]}
    effect: safe
    retry: {attempts: 3, base_delay_ms: 1, max_delay_ms: 1500}
  - name: search
    match: {methods: [POST], path: /search}
    effect: safe
    retry: {attempts: 2, base_delay_ms: 1, max_delay_ms: 100}
default: {name: write}
"""

Script = list[tuple[int, dict[str, str]]]
Client = TestClient[web.Request, web.Application]
Started = Callable[[Script], Awaitable[tuple[Client, list[bytes]]]]


def test_backoff_and_retry_after_arithmetic() -> None:
    policy = RetryPolicy(attempts=5, base_delay_ms=100, max_delay_ms=1000)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_s("7") == 7.0
    assert retry_after_s(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert retry_after_s("soon") is None
    assert delay_before_retry_s(policy, 1, 404, None, random.Random(1)) is None
    assert delay_before_retry_s(policy, 1, 503, "1", random.Random(1)) == 1.0
    assert delay_before_retry_s(policy, 1, 503, "2", random.Random(1)) is None  # above the cap


@given(st.integers(1, 20), st.integers(1, 60_000), st.integers(1, 300_000), st.integers(0, 2**32))
def test_full_jitter_stays_within_the_exponential_ceiling(
    retry: int, base_ms: int, max_ms: int, seed: int
) -> None:
    policy = RetryPolicy(attempts=10, base_delay_ms=base_ms, max_delay_ms=max_ms)
    delay_s = backoff_s(policy, retry, random.Random(seed))
    assert 0 <= delay_s <= min(max_ms, base_ms * 2 ** (retry - 1)) / 1000


async def start_proxy(tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any) -> Started:
    async def start(script: Script) -> tuple[Client, list[bytes]]:
        seen: list[bytes] = []

        async def answer(request: web.Request) -> web.Response:
            seen.append(await request.read())
            status, headers = script.pop(0) if script else (200, {})
            return web.json_response({"attempt": len(seen)}, status=status, headers=headers)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        upstream = await aiohttp_server(app)
        policy = tmp_path / "flaky.yaml"
        policy.write_text(POLICY)
        flags = {"upstreams.up.url": str(upstream.make_url("")), "upstreams.up.policy": str(policy)}
        state = build_state(load_config(environ={}, flags=flags), MemoryStore(), Metrics())
        client: Client = await aiohttp_client(ProxyTestServer(build_proxy_app(state)))
        return client, seen

    return start


async def test_a_safe_read_is_retried_until_it_succeeds(
    tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any
) -> None:
    start = await start_proxy(tmp_path, aiohttp_server, aiohttp_client)
    client, seen = await start([(503, {}), (502, {})])

    response = await client.get("/up/items")

    assert response.status == 200
    assert await response.json() == {"attempt": 3}
    assert len(seen) == 3


async def test_retries_are_bounded_and_the_last_answer_is_relayed(
    tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any
) -> None:
    start = await start_proxy(tmp_path, aiohttp_server, aiohttp_client)
    client, seen = await start([(503, {})] * 5)

    response = await client.get("/up/items")

    assert response.status == 503
    assert len(seen) == 3


async def test_retry_after_is_honoured_within_the_cap_and_ends_retries_above_it(
    tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any
) -> None:
    start = await start_proxy(tmp_path, aiohttp_server, aiohttp_client)
    client, seen = await start([(429, {"Retry-After": "1"}), (429, {"Retry-After": "60"})])

    started = time.monotonic()
    response = await client.get("/up/items")

    assert time.monotonic() - started >= 1.0
    assert response.status == 429
    assert response.headers["Retry-After"] == "60"
    assert len(seen) == 2


async def test_a_safe_post_is_resent_with_the_same_body(
    tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any
) -> None:
    start = await start_proxy(tmp_path, aiohttp_server, aiohttp_client)
    client, seen = await start([(503, {})])

    response = await client.post("/up/search", data=b'{"q": "weather"}')

    assert response.status == 200
    assert seen == [b'{"q": "weather"}', b'{"q": "weather"}']


async def test_an_effect_is_never_retried(
    tmp_path: Path, aiohttp_server: Any, aiohttp_client: Any
) -> None:
    start = await start_proxy(tmp_path, aiohttp_server, aiohttp_client)
    client, seen = await start([(503, {})])

    response = await client.post(
        "/up/orders", data=b"{}", headers={"Idem-Batch": "b", "Idem-Tool-Call": "c"}
    )

    assert response.status == 503
    assert len(seen) == 1
