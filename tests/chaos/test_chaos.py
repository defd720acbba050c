"""Never twice, never lost: agents under faults, audited against the upstream's ledger.

The short profile runs in CI; ``make soak`` runs the long one and prints its figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos.profiles import redis_profile, sqlite_profile
from tests.support.chaos import ChaosProfile, ChaosResult, fleet, run_chaos
from tests.support.fleet import DurableRedis

pytestmark = pytest.mark.e2e


def timeout_s(profile: ChaosProfile) -> float:
    """Traffic, calm and recovery, with room for a slow machine."""
    return profile.duration_s * 1.5 + 120


def check(result: ChaosResult) -> None:
    print("\nchaos figures: " + json.dumps(result.figures, sort_keys=False))
    violations = result.report.violations
    assert result.report.duplicates == {}
    assert violations == [], f"{len(violations)} violations, first: {violations[:20]}"


@pytest.mark.timeout(timeout_s(redis_profile()))
async def test_three_proxies_on_redis_under_faults_never_act_twice(tmp_path: Path) -> None:
    profile = redis_profile()
    with fleet(tmp_path, profile.proxies, redis=DurableRedis(tmp_path)) as running:
        result = await run_chaos(running, profile)
    check(result)
    assert_a_real_run(profile, result)


def assert_a_real_run(profile: ChaosProfile, result: ChaosResult) -> None:
    """Faults of every planned kind happened, and most effects still completed."""
    injected = result.figures["faults_injected"]
    assert isinstance(injected, dict)
    assert {*profile.fault_plan.kinds, *profile.upstream_rates} <= set(injected)
    states = result.report.states
    assert states["completed"] > result.report.effects // 2
    assert states["unknown"] > 0


@pytest.mark.timeout(timeout_s(sqlite_profile()))
async def test_one_proxy_on_sqlite_under_faults_never_acts_twice(tmp_path: Path) -> None:
    profile = sqlite_profile()
    with fleet(tmp_path, profile.proxies) as running:
        result = await run_chaos(running, profile)
    check(result)
    assert_a_real_run(profile, result)
