"""A record outlives its TTL while its effect is still under way, through `idemproxy serve`.

The route's TTL is 3 s and the upstream streams its answer for 5 s (a chunk a second, so the
3 s read timeout never fires): a repeat at 3.5 s must find the effect in flight, wait for it
and replay it, not send it again. On SQLite and on a real Redis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

TTL_S = 3
POLICY = f"""
name: lifetime
routes: []
default: {{name: stream, ttl_s: {TTL_S}, lease_ms: 1000, coalesce_wait_ms: 5000}}
"""
TOOL_CALL = {"Idem-Agent": "agent-1", "Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"}
SLOW_STREAM = "/up/api/sse?events=5&gap_ms=1000"


@pytest.fixture
def proxy(tmp_path: Path, upstream: FakeUpstream, store_url: str) -> Iterator[ServedProxy]:
    policy = tmp_path / "lifetime.yaml"
    policy.write_text(POLICY)
    read_timeout = {"IDEMPROXY_UPSTREAMS__UP__READ_TIMEOUT_S": str(TTL_S)}
    served = ServedProxy.for_upstream(tmp_path, upstream.url, policy, store_url, read_timeout)
    with running(served):
        yield served


async def send(session: aiohttp.ClientSession, proxy: ServedProxy) -> tuple[int, str, bytes]:
    async with session.post(proxy.url + SLOW_STREAM, json={"text": "hi"}, headers=TOOL_CALL) as r:
        return r.status, r.headers.get("Idem-Outcome", ""), await r.read()


async def test_a_repeat_after_the_ttl_of_an_effect_still_streaming_is_not_sent_again(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    async with aiohttp.ClientSession() as session:
        first = asyncio.create_task(send(session, proxy))
        await asyncio.sleep(TTL_S + 0.5)
        second = await send(session, proxy)
        first_status, _, first_body = await first
    assert len(upstream.effects("sse")) == 1
    assert first_status == 200
    assert second == (200, "coalesced", first_body)  # waited for the attempt, got its answer
