"""The attempts in flight in this process: a local duplicate waits on them, not on the store."""

from __future__ import annotations

import asyncio

from idemproxy.effects.attempts import Attempts
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey

KEY = RecordKey("bot", "tc:b:c")


async def test_a_wait_ends_as_the_attempt_ends() -> None:
    attempts = Attempts()
    attempts.begin(KEY, fence=3)
    assert attempts.held() == [(KEY, 3)]

    waiting = asyncio.create_task(attempts.wait_settled(MemoryStore(), KEY, wait_ms=5_000))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    attempts.end(KEY)
    await asyncio.wait_for(waiting, 1)

    assert attempts.held() == []


async def test_a_key_held_nowhere_is_not_waited_for() -> None:
    await asyncio.wait_for(Attempts().wait_settled(MemoryStore(), KEY, wait_ms=5_000), 1)
