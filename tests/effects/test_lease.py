"""An attempt that outlives its lease (a long LLM stream) keeps renewing it, and stops when it
ends."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from idemproxy.effects.lease import LeaseKept
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.effects.test_flow import TOOL_CALL, write_policy
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

LEASE_MS = 150


async def test_a_long_attempt_keeps_its_lease_until_it_settles(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    store = MemoryStore()
    policy = write_policy(tmp_path, f"lease_ms: {LEASE_MS}")
    client, _ = await make_proxy(store=store, policy=policy)
    headers = {**TOOL_CALL, "Idem-Step": "only"}
    attempt = asyncio.create_task(client.post("/up/slow?ms=900", data=b"{}", headers=headers))
    key = RecordKey("default", "tc:batch-1:call-1:s-only")
    for _ in range(4):  # well past the lease several times over
        await asyncio.sleep(LEASE_MS / 1000)
        record = await store.get(key)
        assert record is not None
        assert record.state is RecordState.IN_FLIGHT
        assert record.lease_expires_ms > time.time_ns() // 1_000_000
    response = await attempt
    assert response.status == 200
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.COMPLETED
    assert effects.count("/slow") == 1


KEY = RecordKey("agent", "effect")


class CancellationSwallowingStore(MemoryStore):
    """A store whose renew loses a cancellation, as a ``wait_for`` on Python 3.11 can."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0
        self.renewing = asyncio.Event()

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        self.renewals += 1
        self.renewing.set()
        with contextlib.suppress(asyncio.CancelledError):  # the caller never hears of it
            await asyncio.sleep(0.02)
        return True


async def test_a_short_attempt_never_renews() -> None:
    store = CancellationSwallowingStore()
    with LeaseKept(store, KEY, fence=1, lease_ms=300):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    assert store.renewals == 0


async def test_renewal_stops_with_the_attempt_even_if_a_cancellation_is_lost() -> None:
    store = CancellationSwallowingStore()
    with LeaseKept(store, KEY, fence=1, lease_ms=30):
        await store.renewing.wait()  # leaving now cancels the renewer inside a renewal
    stopped_at = store.renewals
    await asyncio.sleep(0.2)  # twenty renewal periods
    assert store.renewals == stopped_at
