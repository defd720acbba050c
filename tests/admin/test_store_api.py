"""/readyz, ``GET /v1/store`` and ``POST /v1/store/acknowledge-loss`` on stores that keep
their records, may lose them, or lost some; and the ``store`` verbs on a store directly."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from idemproxy.cli import main
from idemproxy.store.safety import LossKind
from idemproxy.store.sqlite import SQLiteStore
from tests.admin.conftest import AUTH, AdminClient
from tests.test_storeguard import SAFE, TunableStore


@pytest.fixture
def store() -> TunableStore:
    return TunableStore()


async def readiness(admin: AdminClient) -> tuple[int, dict[str, Any]]:
    response = await admin.get("/readyz")
    document: dict[str, Any] = await response.json()
    return response.status, document


async def test_a_store_that_keeps_records_is_ready(admin: AdminClient) -> None:
    status, document = await readiness(admin)
    assert (status, document) == (200, {"status": "ready", "store": "memory", "warnings": []})


async def test_accepted_risks_are_warnings_of_a_ready_store(
    admin: AdminClient, store: TunableStore
) -> None:
    store.said = dataclasses.replace(SAFE, persistent=False, persistence="appendonly no")
    status, document = await readiness(admin)
    assert (status, document["status"]) == (200, "ready")
    [warning] = document["warnings"]
    assert "store_safety.require_persistence: true" in warning


async def test_an_evicting_store_is_not_ready_and_says_the_fix(
    admin: AdminClient, store: TunableStore
) -> None:
    store.said = dataclasses.replace(SAFE, eviction_policy="volatile-lru")
    status, document = await readiness(admin)
    assert (status, document["status"]) == (503, "unsafe")
    assert "CONFIG SET maxmemory-policy noeviction" in document["reason"]


async def test_a_loss_stands_until_acknowledged_through_the_api(
    admin: AdminClient, store: TunableStore
) -> None:
    assert (await readiness(admin))[0] == 200
    store.forget_marker()

    status, ready = await readiness(admin)
    shown = await (await admin.get("/v1/store", headers=AUTH)).json()
    body = {"actor": "alice", "note": "charges checked at the upstream"}
    acknowledged = await admin.post("/v1/store/acknowledge-loss", json=body, headers=AUTH)
    document = await acknowledged.json()
    again = await admin.post("/v1/store/acknowledge-loss", json=body, headers=AUTH)

    assert (status, ready["status"]) == (503, "records-lost")
    assert "idemproxy store acknowledge-loss" in ready["reason"]
    assert shown["loss"]["kind"] == LossKind.MARKER_GONE
    assert shown["status"] == "records-lost"
    assert acknowledged.status == 200
    assert (document["status"], document["loss"]) == ("ready", None)
    entry = document["log"][-1]
    assert entry["action"] == "store.loss_acknowledged"
    assert entry["actor"].startswith("alice (admin API from")
    assert entry["note"] == "charges checked at the upstream"
    assert (await readiness(admin))[0] == 200
    assert again.status == 409
    assert (await again.json())["type"].endswith("/state-conflict")


async def test_the_store_is_not_shown_without_the_token(admin: AdminClient) -> None:
    assert (await admin.get("/v1/store")).status == 401
    assert (await admin.post("/v1/store/acknowledge-loss", json={})).status == 401


def test_the_store_verbs_work_on_a_store_directly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/effects.db"

    async def make() -> None:
        store = SQLiteStore(tmp_path / "effects.db")  # as a proxy leaves it
        await store.ping()
        await store.close()

    async def lose() -> None:
        store = SQLiteStore(tmp_path / "effects.db")
        await store.record_loss(LossKind.EVICTED, "12 keys between two checks")
        await store.close()

    asyncio.run(make())
    assert main(["store", "acknowledge-loss", "--store", url]) == 1
    assert "nothing to acknowledge" in capsys.readouterr().err
    asyncio.run(lose())
    assert main(["store", "status", "--store", url]) == 1  # not ready: records were lost
    page = capsys.readouterr().out
    assert "store sqlite: records-lost" in page
    assert "Redis evicted 12 keys between two checks" in page
    assert "store.loss_detected" in page
    acknowledge = ["store", "acknowledge-loss", "--store", url, "--actor", "bob", "--note", "ok"]
    assert main([*acknowledge, "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert (document["status"], document["log"][-1]["actor"]) == ("ready", "bob")
