"""The event loop ``idemproxy serve`` runs on: uvloop when it is installed, else asyncio's.

uvloop (the ``fast`` extra) runs the loop and its sockets in C on libuv. A proxy spends most
of its time there, in callbacks, timers and socket writes, so the same process answers more
requests at lower latency. Nothing in idemproxy depends on it: without it the proxy runs the
same on asyncio's own loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor if uvloop can be imported; None means asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the fastest loop available."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        log.info("event loop: %s", type(runner.get_loop()).__module__.partition(".")[0])
        return runner.run(main)
