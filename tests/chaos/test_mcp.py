"""Never twice, never lost, for MCP tool calls: agents (raw JSON-RPC shaped as the SDK sends it,
and the official ``mcp.Client`` in both revisions) through two proxies on one Redis, while the
proxies are killed, stopped and paused and Redis is killed, audited against the MCP server's
record of what it sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.chaos.profiles import soak_s, soak_selected
from tests.support.chaos_mcp import write_mcp_config
from tests.support.chaos_mcp_run import McpChaosProfile, run_mcp_chaos
from tests.support.faults import PROXY_FAULTS, FaultKind, FaultPlan
from tests.support.fleet import DurableRedis, FleetProxy
from tests.support.mcp_upstream import McpServerProcess
from tests.support.processes import running

pytestmark = pytest.mark.e2e

LEASE_MS = 1000
# `make soak` runs it for a third of IDEMPROXY_SOAK_S, with more agents.
SOAK = soak_selected()
PROFILE = McpChaosProfile(
    duration_s=soak_s() / 3 if SOAK else 12,
    request_budget=2_000_000 if SOAK else 3_000,
    agents=16 if SOAK else 8,
    fault_plan=FaultPlan(
        [*PROXY_FAULTS, FaultKind.REDIS_KILL],
        interval_s=1.5,
        outage_s=(0.2, 0.8),
        pause_s=(1.2, 1.8),  # past the lease: another proxy's repeat finds it run out
    ),
    lease_ms=LEASE_MS,
    seed=int(os.environ.get("IDEMPROXY_CHAOS_SEED", "0")),
)


@pytest.mark.timeout(PROFILE.duration_s * 1.5 + 100)
async def test_mcp_tool_calls_through_two_proxies_under_faults_are_never_sent_twice(
    tmp_path: Path,
) -> None:
    server = McpServerProcess(tmp_path, "session")
    redis = DurableRedis(tmp_path)
    config = write_mcp_config(
        tmp_path / "idemproxy.yaml",
        f"{server.url}",
        lease_ms=LEASE_MS,
        coalesce_wait_ms=1500,
        read_timeout_s=2.0,
    )
    proxies = [
        FleetProxy(tmp_path, i, "--config", str(config), "--store", redis.url) for i in range(2)
    ]
    with running(server, redis, *proxies):
        result = await run_mcp_chaos(server, proxies, redis, redis.url, PROFILE)

    print("\nmcp chaos figures: " + json.dumps(result.figures))
    report = result.report
    assert report.duplicates == {}
    assert report.violations == [], f"{len(report.violations)}, first: {report.violations[:20]}"
    # A real run: every planned fault happened, most calls completed, some were cut off.
    injected = result.figures["faults_injected"]
    assert isinstance(injected, dict)
    assert set(PROFILE.fault_plan.kinds) <= set(injected)
    assert report.finals["done"] > report.calls // 2
    sdk_attempts = result.figures["sdk_attempts"]
    assert isinstance(sdk_attempts, dict)
    assert set(sdk_attempts) == {"auto", "legacy"}
