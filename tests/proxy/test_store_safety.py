"""Effects on a store that may lose records, or lost some: refused, nothing forwarded."""

from __future__ import annotations

import dataclasses

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.records import ClaimRequest, ClaimResult
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog
from tests.test_storeguard import SAFE, TunableStore

TOOL_CALL = {"Idem-Batch": "b", "Idem-Tool-Call": "c"}


class OnceDownStore(TunableStore):
    """Its first claim fails as a Redis restarting would, and it comes back empty."""

    def __init__(self) -> None:
        super().__init__()
        self.went_down = False

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        if not self.went_down:
            self.went_down = True
            self.forget_marker()
            raise StoreUnavailable("redis unavailable during claim: connection reset")
        return await super().claim(request)


async def test_effects_on_an_evicting_store_are_refused_and_reads_pass(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = TunableStore(dataclasses.replace(SAFE, eviction_policy="volatile-lru"))
    client, _ = await make_proxy(store=store)

    refused = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
    read = await client.get("/up/headers")

    assert refused.status == 503
    assert refused.headers["Idem-Outcome"] == "store-unsafe"
    assert refused.headers["x-should-retry"] == "false"
    assert refused.headers["Idem-Key"]
    document = await refused.json(content_type=None)
    assert document["type"].endswith("/store-unsafe")
    assert "maxmemory-policy volatile-lru" in document["detail"]
    assert read.status == 200
    assert effects.count("/messages") == 0


async def test_a_store_back_from_an_outage_is_checked_before_the_next_effect(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(store=OnceDownStore())

    during = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
    after = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)

    assert during.headers["Idem-Outcome"] == "store-unavailable"
    assert (after.status, after.headers["Idem-Outcome"]) == (503, "store-records-lost")
    assert effects.count("/messages") == 0
