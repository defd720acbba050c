"""Chaos profiles: a short one for every CI run, a long one for ``make soak``.

``IDEMPROXY_CHAOS_PROFILE=soak`` picks the long one; ``IDEMPROXY_SOAK_S`` sets its length
(default 600 s of traffic on Redis, a third of that on SQLite and on the Cluster) and
``IDEMPROXY_CHAOS_SEED`` the seed every random choice derives from.
"""

from __future__ import annotations

import os
from dataclasses import replace

from tests.support.agents import AgentPlan
from tests.support.chaos import ChaosProfile
from tests.support.faults import (
    CLUSTER_FAULTS,
    PROXY_FAULTS,
    REDIS_FAULTS,
    SENTINEL_FAULTS,
    FaultKind,
    FaultPlan,
)

UPSTREAM_RATES = {"429": 0.03, "503": 0.02, "500": 0.02, "drop": 0.02, "hang": 0.02}
SOAK_UPSTREAM_RATES = {"429": 0.04, "503": 0.03, "500": 0.03, "drop": 0.03, "hang": 0.03}


def soak_selected() -> bool:
    return os.environ.get("IDEMPROXY_CHAOS_PROFILE", "short") == "soak"


def soak_s() -> float:
    return float(os.environ.get("IDEMPROXY_SOAK_S", "600"))


def soaked(short: ChaosProfile, duration_s: float, agents: int) -> ChaosProfile:
    """The long run of a profile: more time, agents and calls per batch, longer outages."""
    if not soak_selected():
        return short
    return replace(
        short,
        name="soak",
        duration_s=duration_s,
        request_budget=2_000_000,
        agents=agents,
        agent_plan=AgentPlan(calls_per_batch=6),
        fault_plan=replace(short.fault_plan, outage_s=(0.2, 2.0), pause_s=(1.2, 2.5)),
        upstream_rates=SOAK_UPSTREAM_RATES,
    )


def redis_profile() -> ChaosProfile:
    """Three proxies sharing one Redis; proxies and Redis fail in turn."""
    short = ChaosProfile(
        name="short",
        duration_s=15,
        request_budget=6_000,
        agents=10,
        proxies=3,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(
            [*PROXY_FAULTS, *REDIS_FAULTS],
            interval_s=1.5,
            outage_s=(0.2, 1.0),
            pause_s=(1.2, 1.8),
        ),
        upstream_rates=UPSTREAM_RATES,
    )
    return soaked(short, soak_s(), agents=24)


def sqlite_profile() -> ChaosProfile:
    """One proxy on the embedded store, killed, stopped and paused in turn."""
    short = ChaosProfile(
        name="short",
        duration_s=10,
        request_budget=3_000,
        agents=6,
        proxies=1,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(PROXY_FAULTS, interval_s=1.5, outage_s=(0.1, 0.5), pause_s=(1.2, 1.8)),
        upstream_rates=UPSTREAM_RATES,
    )
    return soaked(short, soak_s() / 3, agents=12)


def cluster_profile() -> ChaosProfile:
    """Two proxies on a three-master Cluster whose masters fail over and restart."""
    short = ChaosProfile(
        name="cluster",
        duration_s=18,
        request_budget=6_000,
        agents=8,
        proxies=2,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(
            [*CLUSTER_FAULTS, FaultKind.PROXY_KILL, FaultKind.PROXY_PAUSE],
            interval_s=1.0,
            outage_s=(0.2, 0.8),
            pause_s=(1.2, 1.6),
        ),
        upstream_rates=UPSTREAM_RATES,
    )
    return soaked(short, soak_s() / 3, agents=12)


def sentinel_profile() -> ChaosProfile:
    """Two proxies on a Sentinel set that fails over: the first time with the replica cut off,
    so the master acknowledges claims the replica never gets; claims wait for the replica."""
    short = ChaosProfile(
        name="sentinel",
        duration_s=15,
        request_budget=5_000,
        agents=8,
        proxies=2,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(
            [*SENTINEL_FAULTS, FaultKind.PROXY_KILL, FaultKind.PROXY_PAUSE],
            interval_s=2.0,
            outage_s=(0.3, 1.0),
            pause_s=(1.2, 1.6),
        ),
        upstream_rates=UPSTREAM_RATES,
    )
    return soaked(short, soak_s() / 3, agents=12)


def store_loss_profile() -> ChaosProfile:
    """Two proxies on a Redis that comes back empty after a restart, once, mid-run.

    The proxies are paused past their leases rather than killed: a proxy restarted onto a store
    emptied before a running one recorded the loss marks it anew (docs/reliability.md says so),
    which is a limit of any record kept in the store, not what this run measures.
    """
    short = ChaosProfile(
        name="store_loss",
        duration_s=10,
        request_budget=4_000,
        agents=8,
        proxies=2,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(
            [FaultKind.REDIS_EMPTY, FaultKind.PROXY_PAUSE],
            interval_s=4.0,
            outage_s=(0.2, 0.6),
            pause_s=(1.2, 1.6),
            once=frozenset({FaultKind.REDIS_EMPTY}),
        ),
        upstream_rates=UPSTREAM_RATES,
    )
    return soaked(short, soak_s() / 6, agents=12)
