"""The chaos suite end to end on a real Redis Cluster: three masters, each with a replica.

While agents send their batches, a replica takes over on request, a master is killed and
restarted within its node timeout, and a master is killed until its replica is promoted; the
proxies, on ``redis+cluster://``, are killed and paused too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.profiles import cluster_profile
from tests.chaos.test_chaos import assert_a_real_run, check, timeout_s
from tests.support.chaos import fleet, run_chaos
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

PROFILE = cluster_profile()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster.build(tmp_path, masters=3, replicas=1)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.timeout(timeout_s(PROFILE) + 60)
async def test_proxies_on_a_failing_cluster_never_act_twice(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    with fleet(tmp_path, PROFILE.proxies, cluster=cluster) as running:
        result = await run_chaos(running, PROFILE)
    check(result)
    assert_a_real_run(PROFILE, result)
    # The slots really moved: each failover and master loss counted here waited until a
    # replica served as master. (The set of masters at the end proves nothing: an even number
    # of moves on one shard hands its slots back to the node that had them.)
    injected = result.figures["faults_injected"]
    assert isinstance(injected, dict)
    assert injected.get("cluster_failover", 0) + injected.get("cluster_master_lost", 0) > 0
    assert len(cluster.by_role("master")) == 3
