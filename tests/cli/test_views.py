"""The operator's tables, printed by the console script over a store with the ids, keys, actors
and notes real agents and operators produce: they fit a terminal, say which request each
effect was, and tell apart the effects of one tool call."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from idemproxy.cli.batch_views import steps
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Settlement,
    StoredResponse,
)
from idemproxy.store.sqlite import SQLiteStore
from tests.support.cli import WIDTH, Ran, idemproxy, widest

AGENT, BATCH = "support-bot", "snowflake-42"
PATH = "/v10/channels/1234567890123456789/messages"
DIGESTS = ("9d828243553f27a825214272b1877d7d", "0e8ff35e60963886618b9aa77cb377d4")
UNKNOWN_KEY = f"{AGENT}/tc:{BATCH}:call-3:d-f404f7fc63c98e31ad233e69ac952d9f"
FAILED_KEY = f"{AGENT}/tc:{BATCH}:call-2:s-thread"
ACTOR = "alice@ops-laptop (admin API from 127.0.0.1)"
NOTE = (
    "message is in #support with id 1234567890123456790, posted 14:57:03 by the bot; checked"
    " in the Discord client and the audit log of the guild"
)
OK = StoredResponse(200, (("content-type", "application/json"),), b"{}")


async def effect(
    store: SQLiteStore, effect_id: str, tool_call: str, settlement: Settlement
) -> None:
    meta = EffectMeta(BATCH, tool_call, "post_message", "discord", "POST", PATH)
    claim = await store.claim(ClaimRequest(RecordKey(AGENT, effect_id), "fp", meta, 30_000, 600))
    assert isinstance(claim, Claimed)
    assert await store.settle(RecordKey(AGENT, effect_id), claim.fence, settlement)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A store a proxy filled: a tool call that posted twice (two requests, two digests),
    one whose step failed, and one whose outcome is unknown."""

    async def fill() -> None:
        store = SQLiteStore(tmp_path / "effects.db")
        for digest in DIGESTS:
            await effect(store, f"tc:{BATCH}:call-1:d-{digest}", "call-1", Settlement(
                RecordState.COMPLETED, OK))  # fmt: skip
        refused = StoredResponse(403, (("content-type", "application/json"),), b"{}")
        failed = Settlement(RecordState.COMPLETED, refused, reason="upstream answered 403")
        await effect(store, FAILED_KEY.partition("/")[2], "call-2", failed)
        await effect(store, UNKNOWN_KEY.partition("/")[2], "call-3", Settlement(
            RecordState.UNKNOWN, reason="lease expired: the proxy holding this request stopped"
        ))  # fmt: skip
        await store.close()

    asyncio.run(fill())
    return f"sqlite:///{tmp_path}/effects.db"


def shown(ran: Ran) -> str:
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def test_the_audit_log_fits_a_terminal_and_keeps_keys_and_actors_whole(store_url: str) -> None:
    acting = ("--actor", ACTOR, "--note", NOTE, "--store", store_url)
    shown(idemproxy("review", "resolve", UNKNOWN_KEY, "--as", "applied", *acting))
    shown(idemproxy("review", "retry", FAILED_KEY, *acting))
    shown(idemproxy("recover", AGENT, BATCH, "--strategy", "abandon", *acting))

    page = shown(idemproxy("audit", AGENT, "--store", store_url))

    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    assert lines[0].split() == ["WHEN", "ACTION", "ACTOR"]
    rows = [line.split(None, 3)[2:] for line in lines if line[:1].isdigit()]
    assert rows == [
        ["review.resolve", ACTOR],
        ["review.retry", ACTOR],
        ["recover.abandon", ACTOR],
    ]
    assert f"    target  {UNKNOWN_KEY}" in lines
    assert f"    target  {BATCH}" in lines
    assert "    before  unknown" in lines
    assert "    after   completed" in lines
    assert sum(line.startswith(f"    note    {NOTE[:60]}") for line in lines) == 3


def test_the_review_queue_says_which_request_each_unknown_outcome_was(store_url: str) -> None:
    page = shown(idemproxy("review", "list", "--store", store_url))

    assert widest(page) <= WIDTH, page
    header, row, *notes = page.splitlines()
    assert header.split() == ["SINCE", "UPSTREAM", "METHOD", "PATH", "ACTION"]
    assert row.split()[2:] == ["discord", "POST", PATH, "post_message"]
    assert notes == [
        f"    key     {UNKNOWN_KEY}",
        f"    batch   {BATCH}, tool call call-3",
        "    reason  lease expired: the proxy holding this request stopped",
    ]


def test_batch_status_tells_apart_the_effects_of_one_tool_call(store_url: str) -> None:
    page = shown(idemproxy("batch-status", AGENT, BATCH, "--store", store_url))

    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    completed = lines.index("completed (2)")
    assert lines[completed + 1].split() == [
        "TOOL", "CALL", "STEP", "ACTION", "STATUS", "ATTEMPTS", "EXTERNAL", "ID",
    ]  # fmt: skip
    rows = sorted(line.split() for line in lines[completed + 2 : completed + 4])
    assert rows == sorted(
        ["call-1", f"d-{digest[:8]}", "post_message", "200", "1", "-"] for digest in DIGESTS
    )
    failed = lines.index("failed (1)")
    assert lines[failed + 2].split() == [
        "call-2", "s-thread", "post_message", "completed", "403", "no", "1",
    ]  # fmt: skip
    assert lines[failed + 3 : failed + 5] == [
        f"    key     {FAILED_KEY}",
        "    reason  upstream answered 403",
    ]
    unknown = lines.index("unknown (1)")
    assert lines[unknown + 2].split() == ["call-3", "d-f404f7fc", "post_message", "1"]
    assert lines[unknown + 3] == f"    key     {UNKNOWN_KEY}"


def test_digests_alike_in_their_first_digits_are_shown_whole() -> None:
    keys = [f"{AGENT}/tc:{BATCH}:call-1:d-9d828243{tail}" for tail in ("a" * 24, "b" * 24)]
    actions = [{"tool_call": "call-1", "effect_key": key} for key in keys]
    actions.append({"tool_call": "call-2", "effect_key": f"{AGENT}/ik:order-7-refund"})
    assert steps(actions) == [f"d-9d828243{'a' * 24}", f"d-9d828243{'b' * 24}", "ik:order-7-refund"]
