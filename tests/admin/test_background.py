"""Shutdown of the ledger's background tasks ends even when a cancellation is lost."""

from __future__ import annotations

import asyncio
import sys

from idemproxy.admin.background import cancel_all


async def retrying_loop(rounds: list[int]) -> None:
    """A retry loop like delivery's: its first wait completes in the tick it is cancelled in.

    That is the moment Python 3.11's ``asyncio.wait_for`` drops the cancellation (CPython
    gh-86296); later rounds wait as usual, long enough that a cancellation lands inside the
    wait even on a loaded machine (a wait as short as the loop's lag ends in the same loop
    turn as the cancellation, and drops it too).
    """
    loop = asyncio.get_running_loop()
    while True:
        rounds.append(len(rounds))
        inner = loop.create_future()
        if len(rounds) == 1:
            loop.call_soon(inner.set_result, None)
        else:
            loop.call_later(1.0, inner.set_result, None)
        await asyncio.wait_for(inner, 10)


async def test_a_task_that_lost_its_cancellation_is_cancelled_again() -> None:
    rounds: list[int] = []
    task = asyncio.create_task(retrying_loop(rounds))
    await asyncio.sleep(0)  # the loop is waiting in its first round
    task.cancel()
    await asyncio.sleep(0.05)
    if sys.version_info < (3, 12):  # 3.12 rewrote wait_for and keeps the cancellation
        assert not task.done()  # it was lost, as it was on a busy proxy
        assert len(rounds) > 1

    await asyncio.wait_for(cancel_all([task]), 5)

    assert task.cancelled()
