"""The clock of the stores that keep time themselves (memory, SQLite).

Leases and TTLs are decided by the store's clock, so that every proxy sharing a store agrees
on them (Redis's is its ``TIME``). Reading the wall clock for it would let a step of the wall
clock (an NTP correction, an operator's ``date -s``) lapse every lease at once or keep records
past their TTL. The steady clock here is the wall clock read once, at an anchor, plus the
time the boot clock has counted since: it reads like milliseconds since the epoch, and it moves
only forward, at the rate of real time, whatever the wall clock does meanwhile.

Processes on one host share the boot clock, so the SQLite store anchors it once per boot, in
the file (:func:`idemproxy.store.sqlite.file.clock_offset`): every process on the file then
reads the same time, whenever it started.
"""

from __future__ import annotations

import time
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def boot_ms() -> int:
    """Milliseconds the host has been up, suspend included where the platform counts it."""
    clock = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
    return time.clock_gettime_ns(clock) // 1_000_000


def boot_id() -> str:
    """Names this boot of the host (Linux); "" where the platform does not say."""
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip()
    except OSError:
        return ""


class SteadyClock:
    """Milliseconds since the epoch that a step of the wall clock does not move."""

    __slots__ = ("offset_ms",)

    def __init__(self, offset_ms: int | None = None) -> None:
        """``offset_ms`` is what to add to :func:`boot_ms`; by default the wall clock now."""
        self.offset_ms = wall_ms() - boot_ms() if offset_ms is None else offset_ms

    def __call__(self) -> int:
        return boot_ms() + self.offset_ms
