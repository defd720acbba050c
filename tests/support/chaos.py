"""The chaos scenario runner: agents, faults, a final recovery run, then the audit.

A run is bounded twice, by time and by request count. Its phases:

1. traffic: agents send overlapping batches through the proxies while the upstream draws its
   faults and the injector kills, pauses and stops proxies and Redis;
2. calm: faults stop, every process runs again, hung upstream requests end and every lease
   taken before the calm runs out;
3. recovery: every tool call ever sent is repeated once more to its final answer, as an
   agent's recovery run would, which is also what turns a dead holder's record ``unknown``;
4. audit (:mod:`tests.support.audit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import aiohttp

from idemproxy.store.factory import open_store
from idemproxy.store.protocols import Store
from tests.support.agents import Agent, AgentPlan, Answer, Journal, ToolCall
from tests.support.audit import AuditReport, all_events, audit
from tests.support.cluster import LocalCluster
from tests.support.faults import FaultInjector, FaultPlan
from tests.support.fleet import ChaosUpstream, DurableRedis, FleetProxy, write_proxy_config
from tests.support.processes import Process, running
from tests.support.sentinel import SentinelSet

LEASE_MS = 1000
COALESCE_WAIT_MS = 1500
READ_TIMEOUT_S = 1.0
FINAL_TRIES = 40
FINAL_CONCURRENCY = 16
DELIVERY_WAIT_S = 30.0
COVERAGE_GRACE_S = 60.0


@dataclass(frozen=True)
class ChaosProfile:
    name: str
    duration_s: float
    request_budget: int
    agents: int
    proxies: int
    agent_plan: AgentPlan
    fault_plan: FaultPlan
    upstream_rates: dict[str, float]
    hang_s: float = 2.0  # longer than READ_TIMEOUT_S: a hang always ends as a timeout
    controller_failure_rate: float = 0.1  # deliveries the controller refuses with 503
    seed: int = field(default_factory=lambda: int(os.environ.get("IDEMPROXY_CHAOS_SEED", "0")))


@dataclass
class Fleet:
    upstream: ChaosUpstream
    proxies: list[FleetProxy]
    redis: DurableRedis | None
    store_url: str
    cluster: LocalCluster | None = None
    sentinel: SentinelSet | None = None


@contextlib.contextmanager
def fleet(
    workdir: Path,
    proxies: int,
    *,
    redis: DurableRedis | None = None,
    cluster: LocalCluster | None = None,
    sentinel: SentinelSet | None = None,
    store_query: str = "",
) -> Iterator[Fleet]:
    """Start the upstream, ``redis`` (if given) and ``proxies`` proxies; stop them all after.

    The store is ``redis``, else ``cluster`` or ``sentinel`` (which the caller runs), else one
    SQLite file that all proxies share; ``store_query`` is appended to its URL.
    """
    upstream = ChaosUpstream(workdir)
    store_url = f"sqlite:///{workdir / 'effects.db'}"
    if redis is not None:
        store_url = redis.url
    elif cluster is not None:
        store_url = cluster.url
    elif sentinel is not None:
        store_url = sentinel.url
    store_url += store_query
    config = write_proxy_config(
        workdir / "idemproxy.yaml",
        upstream.url,
        lease_ms=LEASE_MS,
        coalesce_wait_ms=COALESCE_WAIT_MS,
        read_timeout_s=READ_TIMEOUT_S,
    )
    served = [
        FleetProxy(workdir, i, "--config", str(config), "--store", store_url)
        for i in range(proxies)
    ]
    processes: list[Process] = [upstream, *([redis] if redis else []), *served]
    with running(*processes):
        yield Fleet(upstream, served, redis, store_url, cluster, sentinel)


@dataclass
class ChaosResult:
    report: AuditReport
    figures: dict[str, object]


async def run_chaos(fleet: Fleet, profile: ChaosProfile) -> ChaosResult:
    started = time.monotonic()
    rng = random.Random(profile.seed)
    fleet.upstream.set_faults(
        profile.upstream_rates, profile.hang_s, profile.seed, profile.controller_failure_rate
    )
    journal = Journal(budget=profile.request_budget)
    injector = FaultInjector(
        profile.fault_plan,
        fleet.proxies,
        fleet.redis,
        profile.seed,
        fleet.cluster,
        fleet.sentinel,
        fleet.store_url,
    )
    urls = [proxy.url for proxy in fleet.proxies]
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        agents = [
            Agent(f"a{i}", profile.agent_plan, journal, session, lambda: rng.choice(urls), i)
            for i in range(profile.agents)
        ]
        await traffic(profile.duration_s, agents, injector, journal.spent)
        await _calm(fleet, injector, profile)
        final = await _recover(agents[0], journal)
    store = open_store(fleet.store_url)
    try:
        await _delivered(fleet.upstream, store, {call.agent for call in final})
        report = await audit(store, journal, final, fleet.upstream.ledger())
    finally:
        await store.close()
    _check_processes(report, fleet, injector)
    figures = _figures(fleet, profile, journal, injector, report)
    figures["elapsed_s"] = round(time.monotonic() - started, 1)
    return ChaosResult(report, figures)


def _check_processes(report: AuditReport, fleet: Fleet, injector: FaultInjector) -> None:
    """Nothing crashed: every proxy stopped in time when told to, none logged a crash."""
    for slow in injector.slow_stops:
        report.fail(slow)
    crashes = sum(p.output().count("Error handling request") for p in fleet.proxies)
    if crashes:
        report.fail(f"the proxies logged {crashes} unhandled errors; see their logs")


def _figures(
    fleet: Fleet,
    profile: ChaosProfile,
    journal: Journal,
    injector: FaultInjector,
    report: AuditReport,
) -> dict[str, object]:
    ledger = fleet.upstream.ledger()
    return {
        "profile": profile.name,
        "store": fleet.store_url.partition("://")[0],
        "proxies": len(fleet.proxies),
        "agents": profile.agents,
        "requests": journal.sent,
        "request_encodings": {str(k): v for k, v in sorted(journal.encodings.items())},
        "requests_reworded": journal.reworded,
        "requests_abandoned": journal.abandoned,
        "refused_records_lost": journal.outcomes["503 store-records-lost"],
        "effects": report.effects,
        "applied_at_upstream": report.applied,
        "final_states": dict(sorted(report.states.items())),
        "faults_injected": dict(sorted((injector.injected + Counter(ledger.faults)).items())),
        "replica_links_cut": injector.links_cut,
        "store_losses_acknowledged": injector.losses_acknowledged,
        "late_writes_fenced": sum(p.output().count("late write dropped") for p in fleet.proxies),
        "events_delivered": sum(len(set(map(tuple, got))) for got in ledger.controller.values()),
        "events_redelivered": report.redelivered,
        "slow_stops": len(injector.slow_stops),
        "duplicates_found": len(report.duplicates),
        "violations": len(report.violations),
    }


class Runs(Protocol):
    """An agent of a chaos run: it sends until ``stop`` is set."""

    async def run(self, stop: asyncio.Event) -> None: ...


async def traffic(
    duration_s: float, agents: Sequence[Runs], injector: FaultInjector, spent: asyncio.Event
) -> None:
    """Run ``agents`` beside the faults for ``duration_s`` or until the calls are ``spent``,
    and on until every planned fault has happened."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(agent.run(stop)) for agent in agents]
    faults = asyncio.create_task(injector.run(stop))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(spent.wait(), duration_s)
    # On a slow machine restarts take longer: run on until every planned fault has happened.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(injector.covered.wait(), COVERAGE_GRACE_S)
    stop.set()
    await asyncio.gather(*tasks, faults)


async def _calm(fleet: Fleet, injector: FaultInjector, profile: ChaosProfile) -> None:
    await injector.restore()
    fleet.upstream.set_faults({})
    await asyncio.to_thread(fleet.upstream.wait_idle, profile.hang_s + 5)
    # A lease taken just before the calm may still run; it must expire before the audit.
    await asyncio.sleep(LEASE_MS / 1000 + 0.3)


async def _delivered(upstream: ChaosUpstream, store: Store, agents: set[str]) -> None:
    """Until the controller has every event of the outbox, or DELIVERY_WAIT_S passed."""
    deadline = time.monotonic() + DELIVERY_WAIT_S
    pending = set(agents)
    while pending and time.monotonic() < deadline:
        received = upstream.ledger().controller
        for agent in list(pending):
            ids = {event[0] for event in received.get(agent, [])}
            if {event.event_id for event in await all_events(store, agent)} <= ids:
                pending.discard(agent)
        await asyncio.sleep(0.2)


async def _recover(agent: Agent, journal: Journal) -> dict[ToolCall, Answer]:
    """Repeat every tool call once more, as a recovery run would, to its final answer."""
    patient = Agent(
        "recovery",
        AgentPlan(max_tries=FINAL_TRIES, backoff_s=0.2, abandon_rate=0),
        journal,
        agent.session,
        agent.pick_proxy,
        seed=-1,
    )
    limit = asyncio.Semaphore(FINAL_CONCURRENCY)

    async def repeat(call: ToolCall) -> tuple[ToolCall, Answer]:
        async with limit:
            return call, await patient.call(call)

    return dict(await asyncio.gather(*(repeat(call) for call in dict.fromkeys(journal.calls))))
