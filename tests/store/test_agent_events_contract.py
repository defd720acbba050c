"""The agent's events (store/records.py ``EventType``) every backend writes to the outbox in the
same step as the change they report: ``agent.error`` with each effect that turns unknown,
``agent.paused`` with a pause (an operator's or the automatic one), ``agent.resumed`` with a
cleared pause and ``batch.abandoned`` with a batch's archive.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
"""

from __future__ import annotations

import asyncio

from idemproxy.store.control import Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry, ClearRequest
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectEvent, EventType, RecordKey, RecordState, Settlement
from tests.store.test_contract import SHORT_LEASE_MS, claim_fence, claim_request, completed
from tests.store.test_control_contract import LIMIT, REASON_401, attempt, denied


async def agent_events(store: Store, agent: str) -> list[EffectEvent]:
    events = await store.read_events(agent)
    return [event for event in events if not event.type.value.startswith("effect.")]


async def test_an_effect_settled_unknown_puts_the_agent_in_error(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    fence = await claim_fence(store, claim_request(key, batch="b7"))
    unknown = Settlement(RecordState.UNKNOWN, reason="upstream timed out")

    assert await store.settle(key, fence, unknown)

    events = await store.read_events(ns)
    assert [event.type for event in events] == [EventType.UNKNOWN, EventType.AGENT_ERROR]
    error = events[1]
    assert (error.key, error.meta.batch, error.meta.tool_call) == (key, "b7", "call-e1")
    assert (error.reason, error.state) == ("upstream timed out", "unknown")
    assert error.event_id > events[0].event_id


async def test_a_lapsed_lease_swept_puts_the_agent_in_error(store: Store, ns: str) -> None:
    key = RecordKey(ns, "lapsed")
    await store.claim(claim_request(key, lease_ms=SHORT_LEASE_MS))
    await asyncio.sleep(0.15)

    assert [record.key for record in await store.sweep_expired(ns)] == [key]

    [error] = await agent_events(store, ns)
    assert (error.type, error.key, error.meta.batch) == (EventType.AGENT_ERROR, key, "batch-1")
    assert "lease expired" in error.reason


async def test_a_completed_effect_sends_no_agent_event(store: Store, ns: str) -> None:
    key = RecordKey(ns, "ok")
    assert await store.settle(key, await claim_fence(store, claim_request(key)), completed())
    assert await agent_events(store, ns) == []


async def test_pause_and_resume_are_sent_with_their_write(store: Store, ns: str) -> None:
    audit = AuditEntry(agent=ns, action="agent.pause", actor="alice", target=ns)
    pause = Pause(PauseOrigin.OPERATOR, "deploy in progress", "alice")
    written = await store.write_pause(PauseRequest(ns, 0, pause, audit))
    assert written is not None
    resume = AuditEntry(agent=ns, action="agent.resume", actor="bob", target=ns, note="fixed")
    assert await store.write_pause(PauseRequest(ns, written.version, None, resume)) is not None
    # A compare-and-set that loses writes no event.
    assert await store.write_pause(PauseRequest(ns, 0, pause, audit)) is None

    paused, resumed = await agent_events(store, ns)
    assert (paused.type, paused.reason, paused.state) == (
        EventType.AGENT_PAUSED,
        "deploy in progress",
        "paused",
    )
    assert (resumed.type, resumed.reason, resumed.state) == (
        EventType.AGENT_RESUMED,
        "fixed",
        "running",
    )
    assert paused.key == resumed.key == RecordKey(ns, "")


async def test_the_automatic_pause_is_sent_with_the_failure_that_made_it(
    store: Store, ns: str
) -> None:
    keys = [RecordKey(ns, f"f{i}") for i in range(LIMIT)]
    for key in keys:
        await attempt(store, key, denied())

    [paused] = await agent_events(store, ns)
    assert (paused.type, paused.reason, paused.state) == (
        EventType.AGENT_PAUSED,
        REASON_401,
        "paused",
    )
    assert (paused.key, paused.meta.batch) == (keys[-1], "batch-1")
    assert (await store.read_events(ns))[-1] == paused  # after the effect.failed that paused it


async def test_an_archive_abandons_the_batch(store: Store, ns: str) -> None:
    key = RecordKey(ns, "e1")
    await store.settle(key, await claim_fence(store, claim_request(key, batch="b2")), completed())
    restart = AuditEntry(agent=ns, action="batch.restart", actor="alice", target="b2")
    await store.clear_batch(ClearRequest(ns, "b2", [], None, restart))
    assert await agent_events(store, ns) == []  # clearing without an archive abandons nothing

    abandon = AuditEntry(agent=ns, action="batch.abandon", actor="alice", target="b2")
    await store.clear_batch(ClearRequest(ns, "b2", [], b'{"actor":"alice"}', abandon))

    [abandoned] = await agent_events(store, ns)
    assert (abandoned.type, abandoned.meta.batch, abandoned.state) == (
        EventType.BATCH_ABANDONED,
        "b2",
        "abandoned",
    )
    assert (abandoned.key, abandoned.reason) == (RecordKey(ns, ""), "abandoned by alice")
