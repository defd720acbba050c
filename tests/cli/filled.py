"""The store the operator's tables are shown over: what a proxy wrote for the effects of real
agents, with the ids, keys, actors and notes they and their operators produce."""

from __future__ import annotations

from pathlib import Path

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
from tests.support.cli import Ran

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
    """One effect of the batch, claimed and settled as the proxy does."""
    meta = EffectMeta(BATCH, tool_call, "post_message", "discord", "POST", PATH)
    claim = await store.claim(ClaimRequest(RecordKey(AGENT, effect_id), "fp", meta, 30_000, 600))
    assert isinstance(claim, Claimed)
    assert await store.settle(RecordKey(AGENT, effect_id), claim.fence, settlement)


async def fill(path: Path) -> None:
    """What a proxy wrote: a tool call that posted twice (two requests, two digests), one whose
    step failed, and one whose outcome is unknown."""
    store = SQLiteStore(path)
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


def shown(ran: Ran) -> str:
    """What a command that must succeed printed."""
    assert ran.returncode == 0, ran.stderr
    return ran.stdout
