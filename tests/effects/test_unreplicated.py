"""A claim the store's replicas did not confirm: given back unsent, refused, sent on a retry.

A real master and replica; the replica's link runs through a forwarder the test cuts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.store.records import RecordKey, RecordState
from idemproxy.store.redis.store import RedisStore
from tests.proxy.conftest import ProxyFactory
from tests.support.replication import ReplicatedPair, replicated_pair
from tests.support.upstream import EffectLog

pytestmark = pytest.mark.redis

Client = TestClient[web.Request, web.Application]
AGENT = "biller"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ReplicatedPair]:
    with replicated_pair(tmp_path) as running:
        yield running


@pytest.fixture
async def store(pair: ReplicatedPair) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(f"{pair.url}?wait_replicas=1&wait_timeout_ms=100")
    try:
        yield store
    finally:
        await store.close()


async def charge(client: Client, tool_call: str) -> tuple[int, dict[str, str], Any]:
    headers = {"Idem-Agent": AGENT, "Idem-Batch": "b1", "Idem-Tool-Call": tool_call}
    async with client.post("/up/messages", data=b'{"amount": 500}', headers=headers) as answer:
        return answer.status, dict(answer.headers), await answer.json(content_type=None)


async def test_an_unconfirmed_claim_is_refused_unsent_and_its_key_freed(
    make_proxy: ProxyFactory, effects: EffectLog, pair: ReplicatedPair, store: RedisStore
) -> None:
    client, _ = await make_proxy(store)
    assert (await charge(client, "healthy"))[0] == 200
    pair.link.cut()
    status, headers, problem = await charge(client, "charge-1")
    assert status == 503
    assert headers["Idem-Outcome"] == "store-not-replicated"
    assert headers["Retry-After"] == "1"
    assert headers["x-should-retry"] == "true"
    assert problem["type"].endswith("/store-not-replicated")
    assert "0 of 1 within 100 ms" in problem["detail"]
    assert "nothing was forwarded" in problem["detail"]
    assert effects.count("/messages") == 1
    # Given back, not left in flight: the next attempt may take the key at once.
    agent, _, effect_id = headers["Idem-Key"].partition("/")
    record = await store.get(RecordKey(agent, effect_id))
    assert record is not None
    assert record.state is RecordState.NOT_APPLIED
    assert "replicas did not confirm the claim (0 of 1 within 100 ms)" in record.reason

    pair.link.mend()
    pair.wait_synced()
    status, headers, _ = await charge(client, "charge-1")
    assert (status, headers["Idem-Outcome"]) == (200, "forwarded")
    assert effects.count("/messages") == 2


async def test_refusals_for_the_replicas_do_not_pause_the_agent(
    make_proxy: ProxyFactory, effects: EffectLog, pair: ReplicatedPair, store: RedisStore
) -> None:
    client, _ = await make_proxy(store, **{"recovery.pause_after_failures": 2})
    pair.link.cut()
    for index in range(4):
        status, headers, _ = await charge(client, f"charge-{index}")
        assert (status, headers["Idem-Outcome"]) == (503, "store-not-replicated")
    control = await store.read_control(AGENT)
    assert control.pause is None
    assert effects.count("/messages") == 0
