"""Charges claimed on a Sentinel set's master that dies before its replica has the claims.

Real processes: three Sentinels, a master, a replica whose replication link runs through a
forwarder the test cuts (tests/support/sentinel.py), `idemproxy serve` on `redis+sentinel://`
and the fake upstream, which counts the effects it receives. With the link cut the master
goes on acknowledging; it is then SIGKILLed, the Sentinels promote the replica, the old master
comes back as its replica, and the agent repeats each charge.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import FakeUpstream, ServedProxy, running
from tests.support.sentinel import sentinel_set

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

CHARGES = 3
SERVED_WITHIN_S = 20.0
# The store check writes the store's marker on the master every 2 s; one landing while the link
# is cut (a cut outlasts it on a loaded machine) is a write the promoted replica lacks, so every
# repeat would be refused as store-records-lost, rightly: tests/chaos/test_sentinel.py covers
# that. Here the proxy checks only at start, so what is seen is the replica waits alone.
ONE_CHECK = {"IDEMPROXY_STORE_SAFETY__CHECK_INTERVAL_S": "600"}


@dataclass(frozen=True)
class Answer:
    status: int
    outcome: str
    retry_after: str | None


@dataclass(frozen=True)
class Failover:
    during_cut: list[Answer]  # the first attempt of each charge, with the replica cut off
    repeats: list[list[Answer]]  # per charge, every repeat after the failover until served
    effects: list[int]  # per charge, how often it reached the upstream
    log: str  # what the proxy logged


def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("name: charges\nroutes: []\ndefault: {name: charge, coalesce_wait_ms: 200}\n")
    return path


def charge(proxy: ServedProxy, number: int) -> Answer:
    """The agent's request for charge ``number``: the same bytes and key every time."""
    request = urllib.request.Request(
        f"{proxy.url}/up/charges/{number}/messages",
        data=b'{"amount": 500, "currency": "usd"}',
        headers={"Content-Type": "application/json", "Idempotency-Key": f"charge-{number}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            headers = answer.headers
            status = answer.status
    except urllib.error.HTTPError as refusal:
        headers, status = refusal.headers, refusal.code
    return Answer(status, headers.get("Idem-Outcome", ""), headers.get("Retry-After"))


def repeat_until_served(proxy: ServedProxy, number: int) -> list[Answer]:
    """Repeat the charge, as an agent obeying ``Retry-After`` would (only faster), until the
    store lets the proxy answer something other than 503."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    answers = [charge(proxy, number)]
    while answers[-1].status == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
        answers.append(charge(proxy, number))
    return answers


def through_failover(tmp_path: Path, upstream: FakeUpstream, store_query: str) -> Failover:
    with sentinel_set(tmp_path) as redis_set:
        store = redis_set.url + store_query
        proxy = ServedProxy.for_upstream(
            tmp_path, f"{upstream.url}/api", policy(tmp_path), store, env=ONE_CHECK
        )
        with running(proxy):
            # On a healthy set every charge goes through, replica waits or not.
            assert charge(proxy, 0) == Answer(200, "forwarded", None)
            redis_set.link.cut()
            during_cut = [charge(proxy, number) for number in range(1, CHARGES + 1)]
            redis_set.kill_master()
            redis_set.rejoin_old_master()
            repeats = [repeat_until_served(proxy, number) for number in range(1, CHARGES + 1)]
    effects = [len(upstream.effects(f"/charges/{n}/messages")) for n in range(1, CHARGES + 1)]
    return Failover(during_cut, repeats, effects, proxy.output())


def test_without_replica_waits_a_failover_sends_every_charge_again(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    """The failure mode ``wait_replicas`` prevents, shown: the promoted replica never had the
    claims, so each repeat is forwarded as a first call and charges a second time."""
    run = through_failover(tmp_path, upstream, "")
    assert run.during_cut == [Answer(200, "forwarded", None)] * CHARGES
    assert [answers[-1] for answers in run.repeats] == [Answer(200, "forwarded", None)] * CHARGES
    assert run.effects == [2] * CHARGES  # every charge made twice
    # The proxy said so at start-up.
    assert "claims do not wait for them" in run.log
    assert "set wait_replicas=1" in run.log


def test_with_a_replica_wait_no_charge_is_sent_twice(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    run = through_failover(tmp_path, upstream, "?wait_replicas=1&wait_timeout_ms=300")
    # Refused without forwarding: the replica did not confirm the claim.
    assert run.during_cut == [Answer(503, "store-not-replicated", "1")] * CHARGES
    for answers in run.repeats:
        # Refused while the store was failing over, then forwarded once.
        assert answers[-1] == Answer(200, "forwarded", None)
        refusals = {answer.outcome for answer in answers[:-1]}
        assert refusals <= {"store-unavailable", "store-not-replicated"}
    assert run.effects == [1] * CHARGES
    assert "claims do not wait for them" not in run.log
