"""The store failing under a request that is already past its claim."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from idemproxy.store.redis.store import RedisStore
from tests.proxy.conftest import ProxyFactory
from tests.support.processes import RedisServer, running
from tests.support.upstream import EffectLog

TOOL_CALL = {"Idem-Batch": "b", "Idem-Tool-Call": "c"}


@pytest.mark.redis
async def test_a_duplicate_waiting_on_another_proxy_gets_503_when_the_store_dies(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    redis_server = RedisServer(tmp_path)
    stores = [RedisStore.from_url(redis_server.url) for _ in range(2)]
    with running(redis_server):
        # Two proxies share the store: the duplicate on the second one waits by polling it.
        holder, _ = await make_proxy(store=stores[0])
        waiter, _ = await make_proxy(store=stores[1])
        original = asyncio.create_task(
            holder.post("/up/slow?ms=1500", data=b"{}", headers=TOOL_CALL)
        )
        await asyncio.sleep(0.3)
        duplicate = asyncio.create_task(
            waiter.post("/up/slow?ms=1500", data=b"{}", headers=TOOL_CALL)
        )
        await asyncio.sleep(0.3)
        redis_server.stop()
        answer = await duplicate
        assert answer.status == 503
        assert answer.headers["Idem-Outcome"] == "store-unavailable"
        assert (await original).status == 200
    for store in stores:
        await store.close()
    assert effects.count("/slow") == 1
