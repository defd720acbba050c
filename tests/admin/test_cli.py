"""The operator verbs, against a running admin API and directly against a store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from idemproxy.admin.client import AdminClient as ApiClient
from idemproxy.cli import main
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.service import LedgerService
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from idemproxy.store.sqlite import SQLiteStore
from tests.admin.conftest import TOKEN, AdminClient
from tests.ledger.conftest import make_effect


async def run(*argv: str) -> int:
    """The CLI as a user runs it (its own event loop, in a thread beside the test's server)."""
    return await asyncio.to_thread(main, list(argv))


async def test_review_list_and_resolve_through_the_admin_api(
    admin: AdminClient,
    store: MemoryStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("IDEMPROXY_ADMIN_TOKEN", TOKEN)
    url = str(admin.make_url(""))
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)

    assert await run("review", "list", "--admin-url", url) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split() == ["SINCE", "UPSTREAM", "METHOD", "PATH", "ACTION"]
    assert listing[1].split()[2:] == ["discord", "POST", "/channels/1/messages", "post_message"]
    assert f"    key     {key}" in listing

    resolve = ["review", "resolve", str(key), "--as", "not-applied", "--note", "checked"]
    assert await run(*resolve, "--actor", "erin", "--admin-url", url) == 0
    assert "not_applied" in capsys.readouterr().out
    assert await run(*resolve, "--admin-url", url) == 1
    err = capsys.readouterr().err
    assert "not unknown" in err
    assert "current state: not_applied" in err

    assert await run("audit", "bot", "--admin-url", url, "--json") == 0
    [entry] = orjson.loads(capsys.readouterr().out)["entries"]
    assert entry["actor"].startswith("erin (admin API")


async def test_a_wrong_token_or_no_proxy_cannot_reach_the_admin_api(
    admin: AdminClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IDEMPROXY_ADMIN_TOKEN", "wrong")
    assert await run("status", "--admin-url", str(admin.make_url(""))) == 3
    assert "refused the token in IDEMPROXY_ADMIN_TOKEN" in capsys.readouterr().err
    assert await run("status", "--admin-url", "http://127.0.0.1:9") == 3
    assert "is the proxy running" in capsys.readouterr().err


def test_the_verbs_work_on_a_store_directly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/effects.db"

    async def fill() -> None:
        store = SQLiteStore(tmp_path / "effects.db")
        await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, external_id="m-1")
        await make_effect(store, "bot", "b1", "c2", RecordState.UNKNOWN)
        await store.close()

    asyncio.run(fill())
    assert main(["status", "--store", url]) == 1  # an unknown outcome waits for an operator
    assert "1 unknown outcome(s) awaiting review" in capsys.readouterr().out
    assert main(["batch-status", "bot", "b1", "--store", url]) == 0
    out = capsys.readouterr().out
    assert "strategy: manual_only" in out
    assert "m-1" in out
    assert main(["recover", "bot", "b1", "--store", url]) == 1
    assert "unknown outcome" in capsys.readouterr().err
    assert main(["recover", "bot", "b1", "--strategy", "abandon", "--store", url, "--json"]) == 0
    plan = orjson.loads(capsys.readouterr().out)
    assert (plan["strategy"], plan["archived"]) == ("abandon", True)
    assert main(["batch-status", "bot", "nope", "--store", url]) == 1
    assert "batch 'nope' of agent 'bot' is not in the store" in capsys.readouterr().err
    assert main(["batch-status", "bot", "nope", "--store", url, "--json"]) == 1
    error = orjson.loads(capsys.readouterr().out)
    assert (error["error"], error["exit_code"]) == ("not-found", 1)
    key = "bot/tc:b1:c1:d-0"
    resolve = ["review", "resolve", key, "--as", "applied", "--store", url, "--json"]
    assert main(resolve) == 1  # it completed: a verdict is only for an unknown outcome
    error = orjson.loads(capsys.readouterr().out)
    assert (error["error"], error["state"], error["exit_code"]) == (
        "state-conflict",
        "completed",
        1,
    )
    assert main(["status", "--store", "postgres://x"]) == 2
    assert "valid store URLs are" in capsys.readouterr().err


async def test_batches_give_the_same_document_through_the_api_as_on_the_store(
    admin: AdminClient, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    await make_effect(store, "bot", "b1", "c2", RecordState.UNKNOWN)
    await make_effect(store, "bot", "b2", "c1", RecordState.COMPLETED)
    client = ApiClient(str(admin.make_url("")), TOKEN)
    try:
        through_the_api = await client.batches("bot", 10)
        with pytest.raises(RequestRefused) as refused:
            await client.batches("nobody", 10)
    finally:
        await client.close()
    assert through_the_api == await LedgerService(store).batches("bot", 10)
    assert {item["batch"] for item in through_the_api["batches"]} == {"b1", "b2"}
    assert refused.value.code is ProblemCode.NOT_FOUND
