"""The metrics' bounded labels: the agent label and the store's scope."""

from __future__ import annotations

from prometheus_client import generate_latest

from idemproxy.metrics import (
    AGENT_LABELS_MAX,
    OTHER_AGENTS,
    AgentLabels,
    Metrics,
    StoreScope,
)


def test_the_configured_agent_and_the_first_others_are_labelled_the_rest_share_one() -> None:
    labels = AgentLabels("sidecar-bot", limit=2)

    assert labels("a1") == "a1"
    assert labels("a2") == "a2"
    assert labels("a3") == OTHER_AGENTS
    assert labels("sidecar-bot") == "sidecar-bot"  # reserved, however many came first
    assert labels("a1") == "a1"  # a label once given stays
    assert labels("a4") == OTHER_AGENTS


def test_an_unbounded_crowd_of_agents_makes_a_bounded_set_of_labels() -> None:
    labels = AgentLabels("default")
    seen = {labels(f"agent-{n}") for n in range(10 * AGENT_LABELS_MAX)}
    assert len(seen) == AGENT_LABELS_MAX + 1
    assert OTHER_AGENTS in seen
    assert " " in OTHER_AGENTS  # agent ids have no spaces, so no agent can be mistaken for it


def test_a_redis_store_is_shared_and_a_sqlite_or_memory_store_is_the_pods_own() -> None:
    assert StoreScope.of("redis") is StoreScope.SHARED
    assert StoreScope.of("sqlite") is StoreScope.POD
    assert StoreScope.of("memory") is StoreScope.POD


def test_every_gauge_read_from_the_store_says_the_stores_scope() -> None:
    metrics = Metrics(store_scope=StoreScope.SHARED)
    metrics.unknown_outcomes.set(1)
    metrics.store_risk.labels("eviction").set(1)
    metrics.agent_paused.labels("bot").set(1)
    metrics.agents_busy.labels("review").set(1)

    text = generate_latest(metrics.registry).decode()
    store_read = [
        "idemproxy_unknown_outcomes",
        "idemproxy_agents_paused",
        "idemproxy_agent_paused",
        "idemproxy_store_records_lost",
        "idemproxy_store_risk",
        "idemproxy_agents_busy",
        "idemproxy_controller_backlog",
    ]
    for name in store_read:
        lines = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert lines, name
        assert all('store_scope="shared"' in line for line in lines), lines
    assert 'idemproxy_store_risk{risk="eviction",store_scope="shared"} 1.0' in text
    assert 'idemproxy_agent_paused{agent="bot",store_scope="shared"} 1.0' in text
