"""The chaos suite end to end on a real Sentinel set: a master, a replica, three Sentinels.

While agents send their batches, the master dies and the Sentinels promote its replica; the
first time, the replica's link is cut beforehand, so the master acknowledges claims the replica
never receives (tests/support/sentinel.py). The proxies are on ``redis+sentinel://`` with
``wait_replicas=1``: a claim the replica did not confirm is refused, never forwarded, so the
promoted replica has every claim an upstream saw. The proxies are killed and paused too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.profiles import sentinel_profile
from tests.chaos.test_chaos import assert_a_real_run, check, timeout_s
from tests.support.chaos import fleet, run_chaos
from tests.support.sentinel import sentinel_set

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

PROFILE = sentinel_profile()
WAIT_FOR_THE_REPLICA = "?wait_replicas=1&wait_timeout_ms=300"


@pytest.mark.timeout(timeout_s(PROFILE) + 60)
async def test_proxies_on_a_failing_over_sentinel_set_never_act_twice(tmp_path: Path) -> None:
    with (
        sentinel_set(tmp_path) as redis_set,
        fleet(
            tmp_path, PROFILE.proxies, sentinel=redis_set, store_query=WAIT_FOR_THE_REPLICA
        ) as running,
    ):
        result = await run_chaos(running, PROFILE)
    check(result)
    assert_a_real_run(PROFILE, result)
    cut = result.figures["replica_links_cut"]
    assert isinstance(cut, int)
    assert cut >= 1
