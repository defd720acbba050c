"""Chaos profiles: a short one for every CI run, a long one for ``make soak``.

``IDEMPROXY_CHAOS_PROFILE=soak`` picks the long one; ``IDEMPROXY_SOAK_S`` sets its length
(default 600 s) and ``IDEMPROXY_CHAOS_SEED`` the seed every random choice derives from.
"""

from __future__ import annotations

import os

from tests.support.agents import AgentPlan
from tests.support.chaos import ChaosProfile
from tests.support.faults import PROXY_FAULTS, REDIS_FAULTS, FaultPlan

UPSTREAM_RATES = {"429": 0.03, "503": 0.02, "500": 0.02, "drop": 0.02, "hang": 0.02}
SOAK_UPSTREAM_RATES = {"429": 0.04, "503": 0.03, "500": 0.03, "drop": 0.03, "hang": 0.03}


def soak_selected() -> bool:
    return os.environ.get("IDEMPROXY_CHAOS_PROFILE", "short") == "soak"


def redis_profile() -> ChaosProfile:
    """Three proxies sharing one Redis; proxies and Redis fail in turn."""
    kinds = [*PROXY_FAULTS, *REDIS_FAULTS]
    if soak_selected():
        return ChaosProfile(
            name="soak",
            duration_s=float(os.environ.get("IDEMPROXY_SOAK_S", "600")),
            request_budget=2_000_000,
            agents=24,
            proxies=3,
            agent_plan=AgentPlan(calls_per_batch=6),
            fault_plan=FaultPlan(kinds, interval_s=2.0, outage_s=(0.2, 2.0), pause_s=(1.2, 2.5)),
            upstream_rates=SOAK_UPSTREAM_RATES,
        )
    return ChaosProfile(
        name="short",
        duration_s=15,
        request_budget=6_000,
        agents=10,
        proxies=3,
        agent_plan=AgentPlan(),
        fault_plan=FaultPlan(kinds, interval_s=1.5, outage_s=(0.2, 1.0), pause_s=(1.2, 1.8)),
        upstream_rates=UPSTREAM_RATES,
    )


def sqlite_profile() -> ChaosProfile:
    """One proxy on the embedded store, killed, stopped and paused in turn."""
    plan = FaultPlan(PROXY_FAULTS, interval_s=1.5, outage_s=(0.1, 0.5), pause_s=(1.2, 1.8))
    if soak_selected():
        return ChaosProfile(
            name="soak",
            duration_s=float(os.environ.get("IDEMPROXY_SOAK_S", "600")) / 2,
            request_budget=1_000_000,
            agents=12,
            proxies=1,
            agent_plan=AgentPlan(calls_per_batch=6),
            fault_plan=plan,
            upstream_rates=SOAK_UPSTREAM_RATES,
        )
    return ChaosProfile(
        name="short",
        duration_s=10,
        request_budget=3_000,
        agents=6,
        proxies=1,
        agent_plan=AgentPlan(),
        fault_plan=plan,
        upstream_rates=UPSTREAM_RATES,
    )
