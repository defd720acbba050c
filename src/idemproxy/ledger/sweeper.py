"""Housekeeping of the review queue: lapsed leases become unknown, and the gauges are counted
(outcomes awaiting review, agents paused).

A proxy that dies holding a request leaves an ``in_flight`` record whose lease runs out. Until
now that was noticed only when the agent repeated the request; the sweep notices it within
``recovery.sweep_interval_s`` so the effect reaches the review queue (and the controller, as
``effect.unknown``) on its own.
"""

from __future__ import annotations

import asyncio
import logging

from idemproxy.metrics import Metrics
from idemproxy.store.base import Store, StoreError

log = logging.getLogger(__name__)

# Counting stops here per agent: the gauge says "at least this many" beyond it.
UNKNOWN_COUNT_CAP = 10_000


class Sweeper:
    def __init__(self, store: Store, metrics: Metrics, interval_s: float) -> None:
        self._store = store
        self._metrics = metrics
        self._interval_s = interval_s

    async def run(self) -> None:
        """Sweep every ``interval_s`` until cancelled; a store outage only delays a sweep."""
        while True:
            try:
                await self.sweep_once()
            except StoreError as exc:
                log.warning("sweep skipped: store unavailable", extra={"reason": str(exc)})
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self._interval_s)

    async def sweep_once(self) -> int:
        """Turn lapsed leases unknown for every agent; returns how many outcomes await review."""
        waiting = paused = 0
        for agent in await self._store.list_agents():
            for record in await self._store.sweep_expired(agent):
                log.warning(
                    "lease lapsed: outcome unknown, awaiting review",
                    extra={"effect_key": str(record.key), "batch": record.meta.batch},
                )
            waiting += len(await self._store.list_unknown(agent, UNKNOWN_COUNT_CAP))
            paused += (await self._store.read_control(agent)).pause is not None
        self._metrics.unknown_outcomes.set(waiting)
        self._metrics.agents_paused.set(paused)
        return waiting
