"""Fencing through two real proxies: a stalled attempt's late answer never overwrites the new one.

Proxy A takes an effect and forwards it, then freezes (SIGSTOP: its lease renewal stalls with
everything else). Its lease runs out; a repeat through proxy B finds that out and turns the
effect unknown; an operator resolves it as not applied; B forwards it again. Then A wakes up,
gets its upstream answer and tries to record it. That write must be dropped and counted, and
the record must keep B's answer, for every later repeat, on both proxies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from idemproxy.store.factory import open_store
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EventType,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
)
from tests.support.fleet import ChaosUpstream, FleetProxy
from tests.support.processes import RedisServer, http_get, running

pytestmark = pytest.mark.e2e

LEASE_MS = 1000
SLOW_S = 2.5  # the upstream's answer to A comes long after A's lease ran out
HEADERS = {"Idem-Agent": "fencing", "Idem-Batch": "b1", "Idem-Tool-Call": "c1", "Idem-Step": "post"}
KEY = RecordKey("fencing", "tc:b1:c1:s-post")
BODY = b'{"effect": "fencing/b1/c1"}'


@pytest.fixture
def store_url(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'effects.db'}"
        return
    redis = RedisServer(tmp_path)
    with running(redis):
        yield redis.url


async def post(url: str) -> tuple[int, dict[str, str], bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + "/up/effects", data=BODY, headers=HEADERS) as response,
    ):
        return response.status, dict(response.headers), await response.read()


async def wait_for_effects(upstream: ChaosUpstream, count: int) -> None:
    for _ in range(200):
        if len(upstream.ledger().applied.get("fencing/b1/c1", [])) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the upstream never got {count} effects")


def fenced_writes(proxy: FleetProxy) -> float:
    _, body = http_get(proxy.admin_url + "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("idemproxy_fenced_writes_total "):
            return float(line.split()[1])
    raise AssertionError("no idemproxy_fenced_writes_total in /metrics")


async def settled(store: Store, timeout_s: float = 5.0) -> None:
    """Until the record is no longer in flight.

    A proxy writes the outcome just after the answer has left, so a repeat sent the moment the
    answer arrives can still find the attempt in flight, wait for it, and be answered
    ``coalesced`` with the same body; the repeats below check replays of a settled record.
    """
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        record = await store.get(KEY)
        if record is not None and record.state is not RecordState.IN_FLIGHT:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"the record was still in flight after {timeout_s} s")


async def take_over(store: Store, proxy_b: FleetProxy) -> None:
    """B finds A's lease expired (unknown), an operator frees the key, B forwards again."""
    status, headers, body = await post(proxy_b.url)
    assert (status, headers["Idem-Outcome"]) == (409, "outcome-unknown")
    assert b"lease expired" in body
    verdict = Resolution(RecordState.NOT_APPLIED, reason="operator: the post is not there")
    assert isinstance(
        await store.resolve(ResolveRequest(KEY, RecordState.UNKNOWN, verdict)), Resolved
    )


def two_proxies(
    tmp_path: Path, upstream: ChaosUpstream, store_url: str
) -> tuple[FleetProxy, FleetProxy]:
    """Proxies A and B on one store, with a lease of LEASE_MS on every effect."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"name: f\ndefault: {{name: write, lease_ms: {LEASE_MS}}}\n")
    args = ("--upstream", f"up={upstream.url}", "--policy", f"up={policy}", "--store", store_url)
    return FleetProxy(tmp_path, 0, *args), FleetProxy(tmp_path, 1, *args)


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
async def test_a_stalled_attempt_cannot_overwrite_the_attempt_that_took_over(
    tmp_path: Path, store_url: str
) -> None:
    upstream = ChaosUpstream(tmp_path)
    proxy_a, proxy_b = two_proxies(tmp_path, upstream, store_url)
    store = open_store(store_url)
    with running(upstream, proxy_a, proxy_b):
        try:
            upstream.set_faults({"hang": 1.0}, hang_s=SLOW_S)
            original = asyncio.create_task(post(proxy_a.url))
            await wait_for_effects(upstream, 1)
            proxy_a.pause()
            await asyncio.sleep(LEASE_MS / 1000 + 0.3)
            await take_over(store, proxy_b)
            second = asyncio.create_task(post(proxy_b.url))
            await wait_for_effects(upstream, 2)  # A's and B's, both held by the upstream
            proxy_a.resume()  # A now gets its answer while B holds the key
            a_status, _, a_body = await original
            b_status, b_headers, b_body = await second
            await settled(store)
            replays = [await post(proxy.url) for proxy in (proxy_a, proxy_b)]
            record = await store.get(KEY)
            events = await store.read_events(KEY.agent)
            a_fenced = fenced_writes(proxy_a)
            ledger = upstream.ledger()
        finally:
            await store.close()

    # The operator's verdict was wrong, so the upstream acted twice; A's agent saw A's answer,
    # but the record, and every repeat after, holds B's.
    assert ledger.applied == {"fencing/b1/c1": [1, 2]}
    assert a_status == 200
    assert orjson.loads(a_body)["id"] == 1
    assert b_status == 200
    assert b_headers["Idem-Outcome"] == "forwarded"
    assert orjson.loads(b_body)["id"] == 2
    assert record is not None
    assert record.state is RecordState.COMPLETED
    assert record.response is not None
    assert record.response.body == b_body
    for status, headers, body in replays:
        assert (status, headers["Idem-Outcome"], body) == (200, "replayed", b_body)
    assert a_fenced == 1
    assert "late write dropped" in proxy_a.output()
    completions = [event for event in events if event.type is EventType.COMPLETED]
    assert len(completions) == 1
    assert [event.type for event in events[:4]] == [
        EventType.UNKNOWN,
        EventType.AGENT_ERROR,
        EventType.RESOLVED,
        EventType.COMPLETED,
    ]
