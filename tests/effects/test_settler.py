"""An attempt's outcome is written before the agent has the answer, however slow the store."""

from __future__ import annotations

import asyncio

import pytest

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState, Settlement
from tests.effects.test_flow import TOOL_CALL
from tests.proxy.conftest import ProxyFactory


class SlowSettleStore(MemoryStore):
    """A store whose outcome writes take a while, as a loaded Redis's do."""

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        await asyncio.sleep(0.3)
        return await super().settle(key, fence, settlement)


@pytest.mark.parametrize("path", ["/up/messages", "/up/sse?events=3&gap_ms=1"])
async def test_the_outcome_is_recorded_before_the_agent_has_the_answer(
    make_proxy: ProxyFactory, path: str
) -> None:
    store = SlowSettleStore()
    client, _ = await make_proxy(store=store)

    first = await client.post(path, data=b'{"content":"hi"}', headers=TOOL_CALL)
    body = await first.read()
    record = await store.get(RecordKey(*first.headers["Idem-Key"].split("/", 1)))
    again = await client.post(path, data=b'{"content":"hi"}', headers=TOOL_CALL)

    # A crash right after the answer arrived cannot leave its effect unknown, and the
    # repeat that comes at once is a replay, not a wait for an attempt still writing.
    assert record is not None
    assert record.state is RecordState.COMPLETED
    assert again.headers["Idem-Outcome"] == "replayed"
    assert await again.read() == body


async def test_each_failed_outcome_counts_toward_its_agents_failure_rate(
    make_proxy: ProxyFactory,
) -> None:
    client, state = await make_proxy()
    denied = await client.post(
        "/up/status/401", data=b"{}", headers={**TOOL_CALL, "Idem-Tool-Call": "call-401"}
    )
    await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
    assert denied.status == 401
    agent = denied.headers["Idem-Key"].split("/", 1)[0]

    failed = state.metrics.registry.get_sample_value(
        "idemproxy_agent_failed_effects_total", {"agent": agent}
    )

    assert failed == 1  # the 401, not the success
