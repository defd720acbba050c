"""The ``store`` verbs on a store directly: the status page, its exit code, and acknowledging
a loss."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from idemproxy.cli import main
from idemproxy.store.safety import LossKind
from idemproxy.store.sqlite import SQLiteStore


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
