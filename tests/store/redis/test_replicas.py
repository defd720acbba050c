"""The wait_* parameters of a Redis store URL, and what a wait's answer leaves missing."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from idemproxy.store.errors import InvalidStoreURL
from idemproxy.store.factory import open_store
from idemproxy.store.records import Unreplicated
from idemproxy.store.redis.replicas import ReplicaWait, failover_may_lose_claims, split_wait

SENTINEL = "redis+sentinel://127.0.0.1:26379/effects/0"


@pytest.mark.parametrize(
    ("query", "wait"),
    [
        ("wait_replicas=1", ReplicaWait(1, 500, aof=False)),
        ("wait_replicas=2&wait_timeout_ms=100", ReplicaWait(2, 100)),
        ("wait_replicas=1&wait_aof=yes", ReplicaWait(1, aof=True)),
        ("wait_aof=0&wait_replicas=1&wait_timeout_ms=1000", ReplicaWait(1, 1000)),
        ("wait_replicas=0", None),
    ],
)
def test_the_wait_parameters_name_the_wait(query: str, wait: ReplicaWait | None) -> None:
    assert split_wait(f"{SENTINEL}?{query}") == (SENTINEL, wait)


def test_no_query_is_no_wait() -> None:
    assert split_wait(SENTINEL) == (SENTINEL, None)


def test_other_parameters_stay_for_redis_py_as_they_were() -> None:
    url = "redis://127.0.0.1:6379/0?socket_keepalive=true&wait_replicas=1&health_check_interval=5"
    rest, wait = split_wait(url)
    assert rest == "redis://127.0.0.1:6379/0?socket_keepalive=true&health_check_interval=5"
    assert wait == ReplicaWait(1)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("wait_replica=1", "wait_replica is no store parameter; the replica waits are"),
        ("wait_replicas=-1", "wait_replicas is a whole number of replicas from 0 to 100"),
        ("wait_replicas=one", "not 'one'"),
        ("wait_replicas=1&wait_timeout_ms=0", "from 1 to 1000, not '0'"),
        ("wait_replicas=1&wait_timeout_ms=5000", "from 1 to 1000, not '5000'"),
        ("wait_replicas=1&wait_timeout_ms=1.5", "whole number of milliseconds"),
        ("wait_replicas=1&wait_aof=maybe", "wait_aof is 1 or 0"),
        ("wait_replicas=1&wait_replicas=2", "wait_replicas is given twice"),
        ("wait_timeout_ms=100", "apply only to a wait: add wait_replicas=1"),
        ("wait_replicas=0&wait_aof=1", "apply only to a wait"),
    ],
)
def test_a_bad_wait_parameter_is_refused_with_what_to_write(query: str, said: str) -> None:
    url = f"{SENTINEL}?{query}"
    with pytest.raises(InvalidStoreURL) as raised:
        open_store(url)
    assert said in str(raised.value)
    assert "wait_replicas=N" in str(raised.value)  # the valid forms, with the parameters


@pytest.mark.parametrize(
    ("url", "may_lose"),
    [
        (SENTINEL, True),
        ("redis+cluster://127.0.0.1:7000", True),
        (SENTINEL + "?wait_replicas=1", False),
        ("redis://127.0.0.1:6379/0", False),  # no replica it knows of to fail over to
        ("sqlite:///effects.db", False),
    ],
)
def test_only_a_failing_over_store_without_a_wait_may_lose_claims(url: str, may_lose: bool) -> None:
    assert failover_may_lose_claims(url) is may_lose


def test_wait_and_waitaof_are_read_by_their_own_answers() -> None:
    wait, aof = ReplicaWait(2, 300), ReplicaWait(2, 300, aof=True)
    assert wait.command() == ("WAIT", 2, 300)
    assert aof.command() == ("WAITAOF", 0, 2, 300)
    assert wait.shortfall(2) is None
    assert wait.shortfall(3) is None
    assert wait.shortfall(1) == Unreplicated(2, 1, 300)
    assert aof.shortfall([0, 2]) is None
    assert aof.shortfall([1, 1]) == Unreplicated(2, 1, 300)
    assert str(wait.shortfall(0)) == "0 of 2 within 300 ms"


def test_a_server_without_waitaof_is_named_with_the_fix() -> None:
    refused = ResponseError("unknown command 'WAITAOF', with args beginning with: '0' '1' ")
    short = ReplicaWait(1, aof=True).shortfall(refused)
    assert short is not None
    assert short.confirmed == 0
    assert "Redis has since 7.2" in str(short)
    assert "drop wait_aof" in str(short)
