"""A Redis that loses its data under load: the proxies act on nothing twice.

Agents send their batches through two proxies while Redis is killed and comes back empty (its
append-only file gone, as a Redis without a volume). Every record written before is lost, so
any repeat of an effect made before it would look new. The proxies find the loss (the store's
marker is gone) and refuse every effect with ``503 store-records-lost`` until an operator
acknowledges it, which nobody does here: the upstream must have applied no tool call twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos.profiles import store_loss_profile
from tests.chaos.test_chaos import timeout_s
from tests.support.chaos import fleet, run_chaos
from tests.support.fleet import DurableRedis

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

PROFILE = store_loss_profile()
# What a loss leaves behind, and the audit reports: records gone, and every later call held
# for the operator (answered store-records-lost, with no record to name).
LOSS_CONSEQUENCES = (
    "the final repeat ended with 503 store-records-lost",
    "the final repeat got no answer naming its key",
    ": no record under ",
)


@pytest.mark.timeout(timeout_s(PROFILE))
async def test_a_redis_restarted_empty_under_load_has_nothing_acted_twice(
    tmp_path: Path,
) -> None:
    with fleet(tmp_path, PROFILE.proxies, redis=DurableRedis(tmp_path)) as running:
        result = await run_chaos(running, PROFILE)
    print("\nchaos figures: " + json.dumps(result.figures, sort_keys=False))
    assert result.report.duplicates == {}
    injected = result.figures["faults_injected"]
    assert isinstance(injected, dict)
    assert injected["redis_restart_empty"] >= 1
    refused = result.figures["refused_records_lost"]
    assert isinstance(refused, int)
    assert refused > 0
    others = [
        violation
        for violation in result.report.violations
        if not any(consequence in violation for consequence in LOSS_CONSEQUENCES)
    ]
    assert others == [], f"{len(others)} violations, first: {others[:20]}"
