"""The effects this process is attempting right now.

Local duplicates wait on an event instead of polling the store, and shutdown knows which
attempts it abandons.
"""

from __future__ import annotations

import asyncio
import contextlib

from idemproxy.store.clock import wall_ms
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import RecordKey, RecordState

_POLL_FIRST_S = 0.005
_POLL_MAX_S = 0.1


class Attempts:
    def __init__(self) -> None:
        self._held: dict[RecordKey, tuple[int, asyncio.Event]] = {}

    def begin(self, key: RecordKey, fence: int) -> None:
        self._held[key] = (fence, asyncio.Event())

    def end(self, key: RecordKey) -> None:
        entry = self._held.pop(key, None)
        if entry is not None:
            entry[1].set()

    def held(self) -> list[tuple[RecordKey, int]]:
        return [(key, fence) for key, (fence, _) in self._held.items()]

    async def wait_settled(self, store: RecordStore, key: RecordKey, wait_ms: int) -> None:
        """Return once the key is no longer in flight under a live lease, or ``wait_ms`` passed.

        The caller claims again afterwards, which turns the record's state into an answer.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        delay = _POLL_FIRST_S
        while (remaining := deadline - loop.time()) > 0:
            entry = self._held.get(key)
            if entry is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(entry[1].wait(), remaining)
                return
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _POLL_MAX_S)
            record = await store.get(key)
            if record is None or record.state is not RecordState.IN_FLIGHT:
                return
            # The holder died: the claim that follows will find out and mark it unknown.
            if record.lease_expires_ms <= wall_ms():
                return
