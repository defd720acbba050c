"""Keeping an attempt's lease alive while it runs longer than a third of it."""

from __future__ import annotations

import asyncio
import contextlib

from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import RecordKey


class LeaseKept:
    """``with LeaseKept(...)``: renew the lease while a long attempt (an LLM stream) runs.

    Most attempts end well inside a third of their lease, so the renewing task starts only
    once an attempt has run that long: a plain timer costs far less than a task each. Entering
    and leaving need no await, so this adds nothing to the attempt's chain of awaits.

    Leaving also sets a flag the renewing loop checks on every round, not only cancels it: on
    Python 3.11 a cancellation that arrives as an awaited ``wait_for`` completes is lost
    (CPython gh-86296; redis-py awaits one per command), and a renewer that ran on would keep
    the record of an attempt that could not settle in flight for ever, where its lease should
    run out and turn it unknown.
    """

    __slots__ = ("_done", "_fence", "_key", "_lease_ms", "_renewer", "_store", "_timer")

    def __init__(self, store: RecordStore, key: RecordKey, fence: int, lease_ms: int) -> None:
        self._store = store
        self._key = key
        self._fence = fence
        self._lease_ms = lease_ms
        self._timer: asyncio.TimerHandle | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._done = False

    def __enter__(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._period_s, self._start_renewing)

    def __exit__(self, *exc_info: object) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
        if self._renewer is not None:
            self._renewer.cancel()

    @property
    def _period_s(self) -> float:
        return self._lease_ms / 3000

    def _start_renewing(self) -> None:
        self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        while not self._done:
            with contextlib.suppress(StoreError):
                if not await self._store.renew(self._key, self._fence, self._lease_ms):
                    return
            await asyncio.sleep(self._period_s)
