"""The status document says whether a recovery controller is delivered the events, and how
long the store keeps them when none is."""

from __future__ import annotations

import pytest

from idemproxy.config.settings import ControllerConfig
from idemproxy.ledger.service import LedgerService
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState
from idemproxy.store.retention import EVENT_RETENTION_S
from tests.ledger.conftest import SECRET, make_effect


@pytest.mark.parametrize(
    ("controller", "said"),
    [
        (None, "unknown"),
        (ControllerConfig(), "none"),
        (ControllerConfig(url="https://recovery.internal/events", secret=SECRET), "configured"),
    ],
    ids=["store-alone", "no-controller", "controller"],
)
async def test_status_says_whether_events_are_delivered(
    store: Store, ns: str, controller: ControllerConfig | None, said: str
) -> None:
    await make_effect(store, f"{ns}-bot", "b1", "c1", RecordState.COMPLETED)
    document = await LedgerService(store, controller=controller).status()
    assert document["controller"] == said
    [agent] = [entry for entry in document["agents"] if entry["agent"] == f"{ns}-bot"]
    assert agent["backlog"] == 1
    kept = None if store.backend == "memory" else EVENT_RETENTION_S
    assert document["event_retention_s"] == kept


async def test_status_and_the_agent_document_show_the_agent_in_error(store: Store, ns: str) -> None:
    agent = f"{ns}-bot"
    await make_effect(store, f"{ns}-calm", "b1", "c1", RecordState.COMPLETED)
    key = await make_effect(store, agent, "b7", "c1", RecordState.UNKNOWN)
    service = LedgerService(store)

    status = await service.status()
    document = await service.agent(agent)

    by_agent = {entry["agent"]: entry for entry in status["agents"]}
    assert by_agent[f"{ns}-calm"]["error"] is None
    error = by_agent[agent]["error"]
    assert (error["reason"], error["batch"], error["effect_key"]) == (
        "unknown_outcome",
        "b7",
        str(key),
    )
    assert error["strategy"] == "manual_only"
    assert error["seconds"] >= 0
    assert status["in_error"] >= 1  # a shared Redis may hold other tests' agents too
    assert document["error"]["effect_key"] == str(key)
    assert document["state"] == "running"
