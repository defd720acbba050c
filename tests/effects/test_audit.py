"""Every automatic change of an outcome, and every refused attempt that matters, is audited."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.store.control import AUTO_ACTOR
from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    RecordKey,
    RecordState,
    Resolution,
    ResolveRequest,
    Settlement,
)
from tests.effects.test_append import ENTRY, NOTES, POLICY
from tests.effects.test_native import create_post, proxy_for
from tests.proxy.conftest import ProxyFactory
from tests.support.fakes.memory import MEMORY, build_memory_app
from tests.support.fakes.pds import PDS, build_pds_app
from tests.support.fakes.service import Fault, Planned
from tests.support.upstream import EffectLog

AGENT = "default"
TOOL_CALL = {"Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"}


def actions(entries: list[AuditEntry]) -> list[str]:
    return [entry.action for entry in entries]


async def test_a_reused_key_with_another_body_is_refused_and_audited(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store)
    headers = {"Idempotency-Key": '"key-1"', "Content-Type": "application/json"}
    await client.post("/up/messages", data=b'{"a":1}', headers=headers)

    reused = await client.post("/up/messages", data=b'{"a":2}', headers=headers)

    assert reused.status == 422
    [entry] = await store.read_audit(AGENT)
    assert (entry.action, entry.actor) == (AutoAction.CONFLICT_REFUSED, AUTO_ACTOR)
    assert entry.target == reused.headers["Idem-Key"]
    assert (entry.before, entry.after) == ("completed", "refused 422 idempotency-key-reused")


async def test_a_settle_the_store_refuses_because_the_fence_moved_is_audited(
    make_proxy: ProxyFactory,
) -> None:
    class ResolvedMeanwhile(MemoryStore):
        """An operator resolves the effect while its attempt is still being answered."""

        async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
            freed = Resolution(RecordState.NOT_APPLIED, reason="operator: not sent")
            await self.resolve(ResolveRequest(key, RecordState.IN_FLIGHT, freed))
            return await super().settle(key, fence, settlement)

    store = ResolvedMeanwhile()
    client, _ = await make_proxy(store)

    answer = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)

    assert answer.status == 200
    [entry] = await store.read_audit(AGENT)
    assert entry.action == AutoAction.LATE_SETTLE_REFUSED
    assert entry.target == answer.headers["Idem-Key"]
    assert entry.before == "not_applied"  # what stands: the late outcome was not written
    assert "completed" in entry.after


async def test_a_forged_compensation_is_audited(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store)
    headers = {**TOOL_CALL, "Idem-Compensates": f"{AGENT}/tc:b1:x"}

    forged = await client.post("/up/messages", data=b"{}", headers=headers)

    assert forged.status == 403
    [entry] = await store.read_audit(AGENT)
    assert (entry.action, entry.target) == (AutoAction.FORGED_COMPENSATION, f"{AGENT}/tc:b1:x")
    assert effects.effects == []


async def test_a_read_back_that_settles_an_unknown_outcome_is_audited_with_it(
    aiohttp_server: Any, aiohttp_client: Any
) -> None:
    upstream = await aiohttp_server(build_pds_app(gzip=False))
    store = MemoryStore()
    client = await proxy_for(aiohttp_client, upstream, "bluesky", store)
    upstream.app[PDS].plan("create", Planned(Fault.DROP_AFTER))
    assert (await create_post(client)).status == 502

    repeat = await create_post(client)

    assert (repeat.status, repeat.headers["Idem-Outcome"]) == (200, "reconciled")
    [entry] = await store.read_audit(AGENT)
    assert (entry.action, entry.actor) == (AutoAction.RECONCILED, AUTO_ACTOR)
    assert (entry.before, entry.after) == ("unknown", "completed")
    assert "read back" in entry.note


@pytest.fixture
async def memory_upstream(aiohttp_server: Any) -> TestServer:
    server: TestServer = await aiohttp_server(build_memory_app())
    return server


async def test_an_append_found_already_present_is_audited(
    make_proxy: ProxyFactory, memory_upstream: TestServer, tmp_path: Path
) -> None:
    policy = tmp_path / "memory.yaml"
    policy.write_text(POLICY)
    store = MemoryStore()
    client, _ = await make_proxy(
        store, policy=str(policy), **{"upstreams.up.url": str(memory_upstream.make_url(""))}
    )
    memory_upstream.app[MEMORY].blocks["notes"] = NOTES + ENTRY

    answer = await client.post(
        "/up/v1/blocks/notes/append", json={"text": ENTRY}, headers=TOOL_CALL
    )

    assert answer.headers["Idem-Append"] == "present"
    [entry] = await store.read_audit(AGENT)
    assert (entry.action, entry.target) == (AutoAction.APPEND_PRESENT, answer.headers["Idem-Key"])
    assert (entry.before, entry.after) == ("in_flight", "completed")


async def test_an_audit_the_store_cannot_take_is_logged_and_the_answer_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Down(MemoryStore):
        async def append_audit(self, entry: AuditEntry) -> AuditEntry:
            raise StoreUnavailable("down")

    entry = automatic(AGENT, AutoAction.LAPSED, "a/b", "in_flight", "unknown", "lapsed")
    await EffectAudit(Down()).write(entry)

    assert "could not write an audit entry" in caplog.text


async def test_a_lapsed_lease_a_repeat_turns_unknown_is_audited(
    make_proxy: ProxyFactory,
) -> None:
    class DiedBeforeSettling(MemoryStore):
        """The first attempt's proxy dies after sending: its short lease runs out unsettled."""

        settles = 0

        async def claim(self, request: ClaimRequest) -> ClaimResult:
            return await super().claim(dataclasses.replace(request, lease_ms=50))

        async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
            self.settles += 1
            return self.settles > 1 or await super().renew(key, fence, 50)

    store = DiedBeforeSettling()
    client, _ = await make_proxy(store)
    first = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)
    assert first.status == 200
    await asyncio.sleep(0.1)

    repeat = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)

    assert repeat.status == 409  # outcome unknown: never re-sent
    [entry] = await store.read_audit(AGENT)
    assert (entry.action, entry.actor) == (AutoAction.LAPSED, AUTO_ACTOR)
    assert (entry.target, entry.before, entry.after) == (
        first.headers["Idem-Key"],
        "in_flight",
        "unknown",
    )
    assert "noticed by a repeat" in entry.note
