"""Process faults injected during a chaos run: proxies killed, paused and stopped, Redis lost.

Each fault is undone after a short outage, so the run keeps going; the upstream's own faults
(hangs, dropped connections, 429/500/503) are drawn by the upstream itself.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from tests.support.fleet import DurableRedis, FleetProxy


class FaultKind(StrEnum):
    PROXY_KILL = "proxy_sigkill"  # dies holding leases; restarted
    PROXY_TERM = "proxy_sigterm"  # graceful stop: in-flight effects finish or turn unknown
    PROXY_PAUSE = "proxy_sigstop"  # frozen past its leases (a stalled renewal), then resumed
    REDIS_TERM = "redis_sigterm"  # Redis stopped cleanly, restarted from its append-only file
    REDIS_KILL = "redis_sigkill"  # Redis killed, restarted from its append-only file


PROXY_FAULTS = (FaultKind.PROXY_KILL, FaultKind.PROXY_TERM, FaultKind.PROXY_PAUSE)
REDIS_FAULTS = (FaultKind.REDIS_TERM, FaultKind.REDIS_KILL)


@dataclass(frozen=True)
class FaultPlan:
    kinds: Sequence[FaultKind]
    interval_s: float  # mean pause between faults
    outage_s: tuple[float, float]  # how long a killed or stopped process stays down
    pause_s: tuple[float, float]  # how long a paused proxy stays frozen


class FaultInjector:
    def __init__(
        self,
        plan: FaultPlan,
        proxies: Sequence[FleetProxy],
        redis: DurableRedis | None,
        seed: int,
    ) -> None:
        self.plan = plan
        self.proxies = proxies
        self.redis = redis
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()

    def _order(self, kinds: Sequence[FaultKind]) -> Iterator[FaultKind]:
        """Every kind once per round, in a new order each round, so short runs see them all."""
        while True:
            yield from self.rng.sample(list(kinds), len(kinds))

    async def run(self, stop: asyncio.Event) -> None:
        """Proxy faults and Redis faults each come one at a time, the two series overlapping."""
        groups = [
            [kind for kind in self.plan.kinds if kind in group]
            for group in (PROXY_FAULTS, REDIS_FAULTS)
        ]
        await asyncio.gather(*(self._series(stop, kinds) for kinds in groups if kinds))

    async def _series(self, stop: asyncio.Event, kinds: Sequence[FaultKind]) -> None:
        order = self._order(kinds)
        while not stop.is_set():
            delay_s = self.rng.uniform(0.5, 1.5) * self.plan.interval_s
            try:
                await asyncio.wait_for(stop.wait(), delay_s)
                return
            except TimeoutError:
                pass
            kind = next(order)
            await self.inject(kind)
            self.injected[kind] += 1

    async def inject(self, kind: FaultKind) -> None:
        if kind in REDIS_FAULTS:
            assert self.redis is not None
            await self._outage_redis(self.redis, kind)
            return
        # Faults come one at a time: with several proxies, the others keep serving meanwhile.
        proxy = self.rng.choice(self.proxies)
        if kind is FaultKind.PROXY_PAUSE:
            proxy.pause()
            await asyncio.sleep(self.rng.uniform(*self.plan.pause_s))
            proxy.resume()
            return
        if kind is FaultKind.PROXY_KILL:
            proxy.kill()
        else:
            proxy.signal(signal.SIGTERM)
            await asyncio.to_thread(proxy.wait)
        await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
        await asyncio.to_thread(proxy.start)

    async def _outage_redis(self, redis: DurableRedis, kind: FaultKind) -> None:
        if kind is FaultKind.REDIS_KILL:
            redis.kill()
        else:
            await asyncio.to_thread(redis.stop)
        await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
        await asyncio.to_thread(redis.start)

    async def restore(self) -> None:
        """Everything running again, for the final recovery run and the audit."""
        for proxy in self.proxies:
            if proxy.paused:
                proxy.resume()
            if not proxy.running:
                await asyncio.to_thread(proxy.start)
        if self.redis is not None and not self.redis.running:
            await asyncio.to_thread(self.redis.start)
