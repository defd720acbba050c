"""Process faults injected during a chaos run: proxies killed, paused and stopped, Redis lost.

Each fault is undone after a short outage, so the run keeps going; the upstream's own faults
(hangs, dropped connections, 429/500/503) are drawn by the upstream itself. Faults of one
target (the proxies, Redis, the cluster) come one at a time; those of different targets overlap.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import orjson

from tests.support.cluster import LocalCluster
from tests.support.fleet import DurableRedis, FleetProxy
from tests.support.sentinel import SentinelSet


class FaultKind(StrEnum):
    PROXY_KILL = "proxy_sigkill"  # dies holding leases; restarted
    PROXY_TERM = "proxy_sigterm"  # graceful stop: in-flight effects finish or turn unknown
    PROXY_PAUSE = "proxy_sigstop"  # frozen past its leases (a stalled renewal), then resumed
    REDIS_TERM = "redis_sigterm"  # Redis stopped cleanly, restarted from its append-only file
    REDIS_KILL = "redis_sigkill"  # Redis killed, restarted from its append-only file
    REDIS_FULL = "redis_memory_full"  # maxmemory reached under noeviction: every write refused
    REDIS_EMPTY = "redis_restart_empty"  # Redis killed and restarted without its data
    CLUSTER_FAILOVER = "cluster_failover"  # a replica takes over its master's slots on request
    CLUSTER_RESTART = "cluster_master_restart"  # a master killed and restarted within its timeout
    CLUSTER_MASTER_LOST = "cluster_master_lost"  # a master killed until its replica is promoted
    # Sentinel: the replica's link cut (the first time), the master killed, the replica promoted
    SENTINEL_FAILOVER = "sentinel_failover"

    @property
    def target(self) -> str:
        return self.value.partition("_")[0]


# A proxy told to stop (shutdown_timeout_s is 2 s in the chaos config) must be gone by then.
STOP_BOUND_S = 15.0
# Three of the proxies' store checks (store_safety.check_interval_s is 2 s).
LOSS_SEEN_WITHIN_S = 6.0


def idemproxy(*args: str, answers: tuple[int, ...] = (0,)) -> bytes:
    """The installed ``idemproxy`` command's output; it must exit with one of ``answers``
    (1 is a verb's "done, but not fine", as `store status` of a store that lost records)."""
    script = shutil.which("idemproxy", path=str(Path(sys.executable).parent))
    assert script is not None, "install the package first: pip install -e '.[dev]'"
    done = subprocess.run([script, *args], capture_output=True, timeout=30, check=False)
    if done.returncode not in answers:
        raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
    return done.stdout


PROXY_FAULTS = (FaultKind.PROXY_KILL, FaultKind.PROXY_TERM, FaultKind.PROXY_PAUSE)
REDIS_FAULTS = (FaultKind.REDIS_TERM, FaultKind.REDIS_KILL, FaultKind.REDIS_FULL)
CLUSTER_FAULTS = (
    FaultKind.CLUSTER_FAILOVER,
    FaultKind.CLUSTER_RESTART,
    FaultKind.CLUSTER_MASTER_LOST,
)
SENTINEL_FAULTS = (FaultKind.SENTINEL_FAILOVER,)


@dataclass(frozen=True)
class FaultPlan:
    kinds: Sequence[FaultKind]
    interval_s: float  # mean pause between faults
    outage_s: tuple[float, float]  # how long a killed or stopped process stays down
    pause_s: tuple[float, float]  # how long a paused proxy stays frozen
    once: frozenset[FaultKind] = frozenset()  # kinds that happen once per run, not in rounds


class FaultInjector:
    def __init__(
        self,
        plan: FaultPlan,
        proxies: Sequence[FleetProxy],
        redis: DurableRedis | None,
        seed: int,
        cluster: LocalCluster | None = None,
        sentinel: SentinelSet | None = None,
        store_url: str = "",
    ) -> None:
        self.plan = plan
        self.proxies = proxies
        self.redis = redis
        self.cluster = cluster
        self.sentinel = sentinel
        self.store_url = store_url
        self.links_cut = 0
        self.losses_acknowledged = 0
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.covered = asyncio.Event()  # set once every planned kind has happened
        self.slow_stops: list[str] = []

    def _order(self, kinds: Sequence[FaultKind]) -> Iterator[FaultKind]:
        """Every kind once per round, in a new order each round, so short runs see them all."""
        while True:
            yield from self.rng.sample(list(kinds), len(kinds))

    async def run(self, stop: asyncio.Event) -> None:
        targets: dict[str, list[FaultKind]] = {}
        for kind in self.plan.kinds:
            targets.setdefault(kind.target, []).append(kind)
        await asyncio.gather(*(self._series(stop, kinds) for kinds in targets.values()))

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
            if kind in self.plan.once and self.injected[kind]:
                if set(kinds) <= self.plan.once:
                    return  # this target's faults have all happened
                continue
            await self.inject(kind)
            self.injected[kind] += 1
            if set(self.plan.kinds) <= set(self.injected):
                self.covered.set()

    async def inject(self, kind: FaultKind) -> None:
        if kind in (*REDIS_FAULTS, FaultKind.REDIS_EMPTY):
            assert self.redis is not None
            await self._outage_redis(self.redis, kind)
        elif kind in CLUSTER_FAULTS:
            assert self.cluster is not None
            await asyncio.to_thread(self._cluster_fault, self.cluster, kind)
        elif kind in SENTINEL_FAULTS:
            assert self.sentinel is not None
            cut_for_s = self.rng.uniform(*self.plan.outage_s)
            self.links_cut += await asyncio.to_thread(self.sentinel.fail_over, cut_for_s)
            self.losses_acknowledged += await asyncio.to_thread(self._acknowledge_loss)
        else:
            await self._proxy_fault(kind)

    async def _proxy_fault(self, kind: FaultKind) -> None:
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
            try:
                await asyncio.to_thread(proxy.wait, STOP_BOUND_S)
            except subprocess.TimeoutExpired:
                self.slow_stops.append(f"{proxy.name} still running {STOP_BOUND_S} s after SIGTERM")
                proxy.kill()
        await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
        await asyncio.to_thread(proxy.start)

    async def _outage_redis(self, redis: DurableRedis, kind: FaultKind) -> None:
        if kind is FaultKind.REDIS_EMPTY:
            redis.lose_data()
            await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
            await asyncio.to_thread(redis.start)
            return
        if kind is FaultKind.REDIS_FULL:
            # Memory pressure as a store configured for idemproxy meets it: with noeviction
            # Redis refuses writes (OOM) rather than evict, so effects fail closed until the
            # memory is there again, and no record is lost.
            await asyncio.to_thread(redis.set_maxmemory, 1)
            await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
            await asyncio.to_thread(redis.set_maxmemory, 0)
            return
        if kind is FaultKind.REDIS_KILL:
            redis.kill()
        else:
            await asyncio.to_thread(redis.stop)
        await asyncio.sleep(self.rng.uniform(*self.plan.outage_s))
        await asyncio.to_thread(redis.start)

    def _acknowledge_loss(self) -> bool:
        """What an operator does after a failover that lost writes: the proxies refuse effects
        (store-records-lost) until told that what was lost has been looked at. With claims
        waiting for the replica, only outcomes can be lost (they turn unknown), never a claim
        an upstream saw, so it is acknowledged at once, through the CLI as a user would."""
        deadline = time.monotonic() + LOSS_SEEN_WITHIN_S
        while time.monotonic() < deadline:
            url = self.store_url
            shown = idemproxy("store", "status", "--json", "--store", url, answers=(0, 1))
            status = orjson.loads(shown)
            if status["status"] == "records-lost":
                note = "failover: claims waited for the replica"
                idemproxy(
                    "store", "acknowledge-loss", "--store", self.store_url,
                    "--actor", "chaos-operator", "--note", note,
                )  # fmt: skip
                return True
            time.sleep(0.5)
        return False

    def _cluster_fault(self, cluster: LocalCluster, kind: FaultKind) -> None:
        if kind is FaultKind.CLUSTER_FAILOVER:
            cluster.fail_over(self.rng.choice(cluster.by_role("slave")))
            return
        master = self.rng.choice(cluster.by_role("master"))
        if kind is FaultKind.CLUSTER_RESTART:
            master.kill()
            time.sleep(self.rng.uniform(*self.plan.outage_s))
        else:
            cluster.lose_master(master)
        master.start()  # a master back within its timeout; else it rejoins as a replica
        cluster.wait_ok()

    async def restore(self) -> None:
        """Everything running again, for the final recovery run and the audit."""
        for proxy in self.proxies:
            if proxy.paused:
                proxy.resume()
            if not proxy.running:
                await asyncio.to_thread(proxy.start)
        if self.redis is not None and not self.redis.running:
            await asyncio.to_thread(self.redis.start)
        if self.cluster is not None:
            for node in self.cluster.nodes:
                if not node.running:
                    await asyncio.to_thread(node.start)
            await asyncio.to_thread(self.cluster.wait_ok)
