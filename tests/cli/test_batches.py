"""``idemproxy batches AGENT`` over a store a proxy filled, and ``idemproxy recover AGENT``
picking the batch in error when none is named."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from idemproxy.cli import main
from idemproxy.store.records import RecordState
from idemproxy.store.sqlite import SQLiteStore
from tests.ledger.conftest import make_effect
from tests.support.cli import WIDTH, widest


def filled(tmp_path: Path, *batches: tuple[str, RecordState]) -> str:
    """A store with one effect per (batch, state), oldest batch first; its URL."""

    async def fill() -> None:
        store = SQLiteStore(tmp_path / "effects.db")
        for batch, state in batches:
            await make_effect(store, "bot", batch, "c1", RecordState.COMPLETED)
            await make_effect(store, "bot", batch, "c2", state)
            await asyncio.sleep(0.005)
        await store.close()

    asyncio.run(fill())
    return f"sqlite:///{tmp_path}/effects.db"


def test_batches_lists_the_newest_first_with_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch_id = "0b9c3c55-5f8e-4d4e-9a43-7a1f0c1d2e3f"
    url = filled(tmp_path, ("old-ok", RecordState.COMPLETED), (batch_id, RecordState.UNKNOWN))
    assert main(["batches", "bot", "--store", url]) == 0
    page = capsys.readouterr().out
    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    assert lines[0] == "batches of agent bot, newest first (2)"
    assert lines[1].split() == [
        "BATCH", "STRATEGY", "DONE", "FAILED", "PENDING", "UNKNOWN",
    ]  # fmt: skip
    assert lines[2].split()[0] == batch_id
    assert lines[2].split()[1:] == ["manual_only", "1", "-", "-", "1"]
    assert lines[3].startswith("    updated 20")
    assert lines[4] == "    error   1 unknown outcome(s)"
    assert lines[5].split() == ["old-ok", "selective", "2", "-", "-", "-"]
    assert lines[-1] == "1 in error; `idemproxy recover bot` recovers the newest of them"

    assert main(["batches", "bot", "--limit", "1", "--json", "--store", url]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert [item["batch"] for item in document["batches"]] == [batch_id]


def test_recover_without_a_batch_picks_the_newest_in_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = filled(
        tmp_path,
        ("older", RecordState.NOT_APPLIED),
        ("newer", RecordState.NOT_APPLIED),
        ("newest-ok", RecordState.COMPLETED),
    )
    assert main(["recover", "bot", "--store", url, "--json"]) == 0
    ran = capsys.readouterr()
    assert orjson.loads(ran.out)["batch"] == "newer"
    assert (
        "recovering batch newer: the newest of agent bot's batches in error (1 failed)" in ran.err
    )
    assert "older ones in error too: older" in ran.err


def test_recover_without_a_batch_refuses_when_none_is_in_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = filled(tmp_path, ("fine", RecordState.COMPLETED))
    assert main(["recover", "bot", "--store", url]) == 1
    err = capsys.readouterr().err
    assert "agent 'bot' has no batch in error" in err
    assert "`idemproxy batches bot`" in err
