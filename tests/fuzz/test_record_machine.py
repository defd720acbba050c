"""The record state machine against a model, on every store backend (hypothesis stateful).

Hypothesis drives claims, settles, renewals, resolutions and sweeps, with current and stale
fences, leases that are live or already run out, and two fingerprints per key, on a handful of
keys of one agent. After every step each backend must agree with a small model written here
from SPEC section 4, independently of the memory store: the record (state, fence, fingerprint,
attempts, stored answer), the review queue, the batches and each key's events.

A lease is either long (it cannot run out during a test) or 1 ms followed by a pause, so it has
surely run out: the model never has to guess about time.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import fakeredis
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    EventType,
    Paused,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
    Standing,
    StoredResponse,
)
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import REDIS_URL, delete_keys

T = TypeVar("T")

LONG_LEASE_MS = 600_000
EXPIRED_LEASE_MS = 1
EXPIRY_PAUSE_S = 0.005
TTL_S = 600

effect_ids = st.sampled_from(["e0", "e1", "e2"])
fingerprints = st.sampled_from(["fp-a", "fp-b"])
batches = st.sampled_from(["b0", "b1"])
outcomes = st.sampled_from([RecordState.COMPLETED, RecordState.UNKNOWN, RecordState.NOT_APPLIED])
statuses = st.sampled_from([200, 201, 404, 500])
states = st.sampled_from(list(RecordState))
verdicts = st.sampled_from([RecordState.COMPLETED, RecordState.NOT_APPLIED])


@dataclass(frozen=True)
class Model:
    """What one key's record must look like."""

    state: RecordState
    fence: int
    fingerprint: str
    batch: str
    attempts: int
    lease_live: bool = True
    body: bytes | None = None
    events: tuple[EventType, ...] = field(default=())

    def emit(self, event: EventType, **changes: Any) -> Model:
        # An effect turned unknown puts its agent in error in the same step.
        also = (EventType.AGENT_ERROR,) if event is EventType.UNKNOWN else ()
        return replace(self, events=(*self.events, event, *also), **changes)


class RecordMachine(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.agent = f"machine-{uuid.uuid4().hex}"
        self.workdir = tempfile.TemporaryDirectory()
        self.store = self.open_store()
        self.model: dict[str, Model] = {}
        self.last_fence = 0  # every fence of the agent's keys comes from one counter
        self.freed_events: dict[str, tuple[EventType, ...]] = {}  # history of deleted keys

    def open_store(self) -> Store:
        if self.backend == "memory":
            return MemoryStore()
        if self.backend == "sqlite":
            return SQLiteStore(Path(self.workdir.name) / "effects.db")
        if self.backend == "fakeredis":
            return RedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()))
        return RedisStore.from_url(REDIS_URL)

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(call)

    def key(self, effect_id: str) -> RecordKey:
        return RecordKey(self.agent, effect_id)

    def teardown(self) -> None:
        self.run(self.store.close())
        if self.backend == "redis":
            self.run(delete_keys(REDIS_URL, self.agent))
        self.loop.close()
        self.workdir.cleanup()

    def expire_if(self, expired: bool) -> None:
        if expired:
            self.loop.run_until_complete(asyncio.sleep(EXPIRY_PAUSE_S))

    @rule(effect_id=effect_ids, fingerprint=fingerprints, batch=batches, expired=st.booleans())
    def claim(self, effect_id: str, fingerprint: str, batch: str, expired: bool) -> None:
        lease_ms = EXPIRED_LEASE_MS if expired else LONG_LEASE_MS
        meta = EffectMeta(batch=batch, tool_call=effect_id, upstream="up", method="POST")
        request = ClaimRequest(self.key(effect_id), fingerprint, meta, lease_ms, TTL_S)
        result = self.run(self.store.claim(request))
        claimed = isinstance(result, Claimed)
        self.expire_if(expired and claimed)
        before = self.model.get(effect_id)
        expected = claim_outcome(before, fingerprint, batch, not expired, self.last_fence)
        assert claimed == (expected.state is RecordState.IN_FLIGHT and expected != before)
        match result:
            case Claimed(fence=fence):
                assert fence == expected.fence
                self.last_fence = expected.fence
            case Standing(record=record):
                assert (record.fence, record.state) == (expected.fence, expected.state)
            case Paused():
                raise AssertionError("no agent of the machine is ever paused")
        self.model[effect_id] = expected

    @rule(effect_id=effect_ids, stale=st.booleans(), state=outcomes, status=statuses)
    def settle(self, effect_id: str, stale: bool, state: RecordState, status: int) -> None:
        before = self.model.get(effect_id)
        fence = (before.fence if before else 1) - int(stale)
        body = f"{effect_id}@{fence}:{status}".encode()
        response = StoredResponse(status, (("content-type", "text/plain"),), body)
        settlement = Settlement(state, response if state is RecordState.COMPLETED else None)
        written = self.run(self.store.settle(self.key(effect_id), fence, settlement))
        holds = before is not None and before.state is RecordState.IN_FLIGHT
        assert written == (holds and not stale)
        if written:
            assert before is not None
            self.model[effect_id] = before.emit(
                settlement.event_type(), state=state, body=settlement.response and body
            )

    @rule(effect_id=effect_ids, stale=st.booleans(), expired=st.booleans())
    def renew(self, effect_id: str, stale: bool, expired: bool) -> None:
        before = self.model.get(effect_id)
        fence = (before.fence if before else 1) - int(stale)
        lease_ms = EXPIRED_LEASE_MS if expired else LONG_LEASE_MS
        renewed = self.run(self.store.renew(self.key(effect_id), fence, lease_ms))
        holds = before is not None and before.state is RecordState.IN_FLIGHT
        assert renewed == (holds and not stale)
        if renewed:
            assert before is not None
            self.expire_if(expired)
            self.model[effect_id] = replace(before, lease_live=not expired)

    @rule(effect_id=effect_ids, expected=states, verdict=verdicts)
    def resolve(self, effect_id: str, expected: RecordState, verdict: RecordState) -> None:
        before = self.model.get(effect_id)
        body = f"resolved {effect_id}".encode()
        answer = StoredResponse(200, (), body) if verdict is RecordState.COMPLETED else None
        result = self.run(
            self.store.resolve(
                ResolveRequest(self.key(effect_id), expected, Resolution(verdict, answer))
            )
        )
        assert isinstance(result, Resolved) == (before is not None and before.state is expected)
        if isinstance(result, Resolved):
            assert before is not None
            self.last_fence = max(self.last_fence, before.fence) + 1
            self.model[effect_id] = before.emit(
                EventType.RESOLVED,
                state=verdict,
                fence=self.last_fence,
                lease_live=False,
                body=answer and body,
            )

    @rule()
    def sweep(self) -> None:
        swept = self.run(self.store.sweep_expired(self.agent))
        lapsed = {
            effect_id
            for effect_id, model in self.model.items()
            if model.state is RecordState.IN_FLIGHT and not model.lease_live
        }
        assert {record.key.effect_id for record in swept} == lapsed
        for effect_id in lapsed:
            self.model[effect_id] = lapse(self.model[effect_id])

    @invariant()
    def agrees_with_the_model(self) -> None:
        for effect_id, model in self.model.items():
            record = self.run(self.store.get(self.key(effect_id)))
            assert record is not None
            seen = (record.state, record.fence, record.fingerprint, record.attempts)
            assert seen == (model.state, model.fence, model.fingerprint, model.attempts)
            assert record.meta.batch == model.batch
            assert (record.response.body if record.response else None) == model.body
        unknown = self.run(self.store.list_unknown(self.agent))
        assert {r.key.effect_id for r in unknown} == {
            effect_id for effect_id, m in self.model.items() if m.state is RecordState.UNKNOWN
        }
        for batch in ("b0", "b1"):
            listed = self.run(self.store.batch_records(self.agent, batch))
            assert {r.key.effect_id for r in listed} == {
                effect_id for effect_id, m in self.model.items() if m.batch == batch
            }
        events = self.run(self.store.read_events(self.agent, limit=10_000))
        for effect_id, model in self.model.items():
            assert tuple(e.type for e in events if e.key.effect_id == effect_id) == model.events


def lapse(model: Model) -> Model:
    return model.emit(EventType.UNKNOWN, state=RecordState.UNKNOWN)


def claim_outcome(
    before: Model | None, fingerprint: str, batch: str, lease_live: bool, last_fence: int
) -> Model:
    """The key's record after a claim, per SPEC section 4: a claim that takes the key gets a
    fence above the agent's last one and the key's own."""
    fence = max(last_fence, before.fence if before else 0) + 1
    fresh = Model(RecordState.IN_FLIGHT, fence, fingerprint, batch, 1, lease_live)
    if before is None:
        return fresh
    if before.state is RecordState.IN_FLIGHT:
        return before if before.lease_live else lapse(before)
    if before.state is RecordState.NOT_APPLIED and before.fingerprint == fingerprint:
        return replace(fresh, attempts=before.attempts + 1, events=before.events)
    if before.state is RecordState.COMPLETED and before.fingerprint == fingerprint:
        return before.emit(EventType.REPLAYED)
    return before


def machine_settings(max_examples: int) -> settings:
    """Examples per backend: the in-process ones are cheap; fakeredis runs Lua slowly."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


class MemoryRecordMachine(RecordMachine):
    backend = "memory"


class SQLiteRecordMachine(RecordMachine):
    backend = "sqlite"


class FakeRedisRecordMachine(RecordMachine):
    backend = "fakeredis"


class RedisRecordMachine(RecordMachine):
    backend = "redis"


TestMemoryRecords = MemoryRecordMachine.TestCase
TestMemoryRecords.settings = machine_settings(80)
TestSQLiteRecords = SQLiteRecordMachine.TestCase
TestSQLiteRecords.settings = machine_settings(20)
TestFakeRedisRecords = FakeRedisRecordMachine.TestCase
TestFakeRedisRecords.settings = machine_settings(15)
TestRedisRecords = pytest.mark.redis(RedisRecordMachine.TestCase)
TestRedisRecords.settings = machine_settings(30)
