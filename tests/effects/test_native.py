"""Unknown outcomes settled by an upstream adapter, in-process: never two re-sends of one key."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient, TestServer

from idemproxy.config.loader import load_config
from idemproxy.metrics import Metrics
from idemproxy.proxy.app import build_proxy_app
from idemproxy.server import build_state
from idemproxy.store.clock import wall_ms
from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyTestServer
from tests.support.fakes.pds import DID, PDS, PdsService, build_pds_app
from tests.support.fakes.service import Fault, Planned
from tests.support.fakes.stripe import STRIPE, build_stripe_app

Client = TestClient[web.Request, web.Application]
TOOL_CALL = {"Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"}
STRIPE_HEADERS = {
    **TOOL_CALL,
    "Authorization": "Bearer sk_test_1",
    "Content-Type": "application/x-www-form-urlencoded",
}
INTENT = b"amount=700&currency=eur"
PDS_HEADERS = {**TOOL_CALL, "Authorization": "Bearer token", "Content-Type": "application/json"}
POST = orjson.dumps(
    {
        "repo": DID,
        "collection": "app.bsky.feed.post",
        "record": {"text": "hello", "createdAt": "2026-01-01T00:00:00Z"},
    }
)
ONE_DAY_MS = 86_400_000


async def proxy_for(
    aiohttp_client: Any, upstream: TestServer, pack: str, store: MemoryStore | None = None
) -> Client:
    flags = {
        "upstreams.up.url": str(upstream.make_url("")).rstrip("/"),
        "upstreams.up.policy": pack,
    }
    state = build_state(load_config(environ={}, flags=flags), store or MemoryStore(), Metrics())
    client: Client = await aiohttp_client(ProxyTestServer(build_proxy_app(state)))
    return client


async def test_concurrent_repeats_of_an_unknown_stripe_call_resend_it_once(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    upstream = await aiohttp_server(build_stripe_app())
    stripe = upstream.app[STRIPE]
    client = await proxy_for(aiohttp_client, upstream, "stripe")
    stripe.plan("create", Planned(Fault.DROP_AFTER))
    lost = await client.post("/up/v1/payment_intents", data=INTENT, headers=STRIPE_HEADERS)
    assert lost.status == 502
    # The native key went with it, so the SDK is told a retry helps.
    assert lost.headers["Stripe-Should-Retry"] == "true"
    assert lost.headers["x-should-retry"] == "true"

    async def repeat() -> tuple[int, bytes, str]:
        response = await client.post("/up/v1/payment_intents", data=INTENT, headers=STRIPE_HEADERS)
        return response.status, await response.read(), response.headers["Idem-Outcome"]

    results = await asyncio.gather(*(repeat() for _ in range(20)))

    assert {status for status, _, _ in results} == {200}
    assert {orjson.loads(body)["id"] for _, body, _ in results} == {stripe.effects[0]["id"]}
    outcomes = [outcome for _, _, outcome in results]
    assert outcomes.count("reconciled") == 1
    assert set(outcomes) <= {"reconciled", "coalesced", "replayed"}
    assert len(stripe.effects) == 1
    assert len(stripe.seen_on("/v1/payment_intents")) == 2  # the original and one re-send


async def test_past_stripes_window_an_unknown_call_waits_for_review(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    upstream = await aiohttp_server(build_stripe_app())
    stripe = upstream.app[STRIPE]
    # The store's clock, which the window is measured by, moves a day on after the lost call.
    elapsed_ms = [0]
    store = MemoryStore(clock_ms=lambda: wall_ms() + elapsed_ms[0])
    client = await proxy_for(aiohttp_client, upstream, "stripe", store)
    stripe.plan("create", Planned(Fault.DROP_AFTER))
    await client.post("/up/v1/payment_intents", data=INTENT, headers=STRIPE_HEADERS)
    elapsed_ms[0] = ONE_DAY_MS

    held = await client.post("/up/v1/payment_intents", data=INTENT, headers=STRIPE_HEADERS)

    assert held.status == 409
    assert held.headers["Idem-Outcome"] == "outcome-unknown"
    assert held.headers["Stripe-Should-Retry"] == "false"
    assert len(stripe.seen_on("/v1/payment_intents")) == 1


async def bluesky_proxy(
    aiohttp_server: Any, aiohttp_client: Any, *, gzip: bool
) -> tuple[Client, PdsService]:
    """The bluesky pack in front of a fake PDS (that gzips what it may, with ``gzip``)."""
    upstream = await aiohttp_server(build_pds_app(gzip=gzip))
    return await proxy_for(aiohttp_client, upstream, "bluesky"), upstream.app[PDS]


@pytest.fixture
async def bluesky(aiohttp_server: Any, aiohttp_client: Any) -> tuple[Client, PdsService]:
    return await bluesky_proxy(aiohttp_server, aiohttp_client, gzip=False)


async def create_post(client: Client, *extra: tuple[str, str]) -> ClientResponse:
    headers = {**PDS_HEADERS, **dict(extra)}
    return await client.post("/up/xrpc/com.atproto.repo.createRecord", data=POST, headers=headers)


async def test_concurrent_repeats_of_an_unknown_create_read_it_back_and_post_once(
    bluesky: tuple[Client, PdsService],
) -> None:
    client, pds = bluesky
    pds.plan("create", Planned(Fault.DROP_AFTER))
    lost = await create_post(client)
    assert lost.status == 502
    assert lost.headers["x-should-retry"] == "true"

    async def repeat() -> tuple[int, dict[str, Any]]:
        response = await create_post(client)
        return response.status, orjson.loads(await response.read())

    results = await asyncio.gather(*(repeat() for _ in range(10)))

    assert {status for status, _ in results} == {200}
    assert {answer["uri"] for _, answer in results} == {pds.effects[0]["uri"]}
    assert len(pds.effects) == 1
    assert len(pds.seen_on("createRecord")) == 1
    assert len(pds.seen_on("getRecord")) >= 1


async def test_a_create_the_pds_never_got_is_sent_again_once(
    bluesky: tuple[Client, PdsService],
) -> None:
    client, pds = bluesky
    pds.plan("create", Planned(Fault.DROP_BEFORE))
    await create_post(client)

    answer = await create_post(client)

    assert answer.status == 200
    assert answer.headers["Idem-Outcome"] == "reconciled"
    assert len(pds.effects) == 1
    assert len(pds.seen_on("createRecord")) == 2


@pytest.fixture
async def gzipping_bluesky(aiohttp_server: Any, aiohttp_client: Any) -> tuple[Client, PdsService]:
    return await bluesky_proxy(aiohttp_server, aiohttp_client, gzip=True)


async def test_a_lost_create_is_read_back_though_the_agent_accepts_gzip(
    gzipping_bluesky: tuple[Client, PdsService],
) -> None:
    client, pds = gzipping_bluesky
    pds.plan("create", Planned(Fault.DROP_AFTER))
    await create_post(client)

    answer = await create_post(client, ("Accept-Encoding", "gzip"))

    assert (answer.status, answer.headers["Idem-Outcome"]) == (200, "reconciled")
    assert orjson.loads(await answer.read())["uri"] == pds.effects[0]["uri"]
    assert pds.seen_on("getRecord")[0].headers["Accept-Encoding"] == "identity"
    assert len(pds.seen_on("createRecord")) == 1


async def test_a_create_answered_500_is_read_back_though_the_agent_accepts_gzip(
    gzipping_bluesky: tuple[Client, PdsService],
) -> None:
    client, pds = gzipping_bluesky
    pds.plan("create", Planned(Fault.FAIL_AFTER))

    answer = await create_post(client, ("Accept-Encoding", "gzip"))

    assert (answer.status, answer.headers["Idem-Outcome"]) == (200, "reconciled")
    assert orjson.loads(await answer.read())["uri"] == pds.effects[0]["uri"]
