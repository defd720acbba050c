"""``idemproxy approvals`` on a store a proxy filled: list what waits, show one, decide it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from idemproxy.cli import main
from idemproxy.store.approvals import HoldRequest
from idemproxy.store.records import EffectMeta, RecordKey
from idemproxy.store.sqlite import SQLiteStore
from tests.support.cli import WIDTH, widest

SUMMARY = '{"method": "POST", "path": "/v1/payment_intents", "body": {"amount": "25000"}}'


def held(tmp_path: Path) -> tuple[str, str]:
    """A store holding one effect for approval; its URL and the approval's id."""

    async def fill() -> str:
        store = SQLiteStore(tmp_path / "effects.db")
        meta = EffectMeta("batch-1", "call-1", "", "stripe", "POST", "/v1/payment_intents")
        request = HoldRequest(
            RecordKey("billing-bot", "tc:batch-1:call-1"),
            "fp",
            meta,
            "/amount above 10000",
            SUMMARY,
            86_400_000,
            900_000,
        )
        approval = await store.hold(request)
        await store.close()
        return approval.approval_id

    approval_id = asyncio.run(fill())
    return f"sqlite:///{tmp_path}/effects.db", approval_id


def test_the_list_shows_what_waits_and_exits_1_until_it_is_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, approval_id = held(tmp_path)
    assert main(["approvals", "list", "--store", url]) == 1
    page = capsys.readouterr().out
    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    assert lines[0].split() == ["SINCE", "AGENT", "STATE", "UPSTREAM", "METHOD", "PATH"]
    assert lines[1].split()[-5:] == [
        "billing-bot", "awaiting_approval", "stripe", "POST", "/v1/payment_intents",
    ]  # fmt: skip
    assert f"id      {approval_id}" in page
    assert "held    /amount above 10000" in page
    assert main(["status", "--store", url]) == 1
    assert "1 effect(s) awaiting approval" in capsys.readouterr().out

    assert main(["approvals", "show", "billing-bot", approval_id, "--store", url]) == 0
    assert SUMMARY in capsys.readouterr().out
    decide = ["approvals", "approve", "billing-bot", approval_id, "--note", "ok", "--store", url]
    assert main([*decide, "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert (document["state"], document["note"]) == ("approved", "ok")
    assert main(["approvals", "list", "--store", url]) == 0  # approved, not yet used: no wait
    capsys.readouterr()


def test_a_second_decision_is_refused_with_the_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, approval_id = held(tmp_path)
    assert main(["approvals", "deny", "billing-bot", approval_id, "--store", url]) == 0
    capsys.readouterr()
    assert main(["approvals", "approve", "billing-bot", approval_id, "--store", url]) == 1
    refused = capsys.readouterr()
    assert "is denied, not awaiting a decision" in refused.err
    assert "current state: denied" in refused.err
