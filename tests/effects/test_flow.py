"""The exactly-once behaviour an agent sees through the proxy (in-process, memory store)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.proxy.state import ProxyState
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
)
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

TOOL_CALL = {
    "Idem-Batch": "batch-1",
    "Idem-Tool-Call": "call-1",
    "Content-Type": "application/json",
}


def write_policy(tmp_path: Path, route: str) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: test\nroutes: []\ndefault:\n  name: write\n"
        + "".join(f"  {line}\n" for line in route.strip().splitlines())
    )
    return str(path)


async def test_first_call_is_forwarded_and_repeat_is_a_byte_identical_replay(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    first = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)
    first_body = await first.read()
    second = await client.post("/up/messages", data=b'{"content":"hi"}', headers=TOOL_CALL)

    assert first.status == 200
    assert first.headers["Idem-Outcome"] == "forwarded"
    assert second.status == 200
    assert await second.read() == first_body
    assert second.headers["Idem-Outcome"] == "replayed"
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.headers["x-should-retry"] == "false"
    assert second.headers["Idem-Key"] == first.headers["Idem-Key"]
    assert second.headers["X-Request-Id"] == first.headers["X-Request-Id"]
    assert "Set-Cookie" not in second.headers
    assert effects.count("/messages") == 1


async def test_hundred_concurrent_identical_requests_make_one_effect(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()

    async def call() -> tuple[int, bytes, str]:
        response = await client.post("/up/slow?ms=200", data=b"{}", headers=TOOL_CALL)
        return response.status, await response.read(), response.headers["Idem-Outcome"]

    results = await asyncio.gather(*(call() for _ in range(100)))

    assert effects.count("/slow") == 1
    assert {status for status, _, _ in results} == {200}
    assert len({body for _, body, _ in results}) == 1
    outcomes = [outcome for _, _, outcome in results]
    assert outcomes.count("forwarded") == 1
    assert set(outcomes) <= {"forwarded", "coalesced", "replayed"}


async def test_reused_explicit_key_with_other_body_is_refused(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    headers = {"Idempotency-Key": '"key-1"', "Content-Type": "application/json"}
    await client.post("/up/messages", data=b'{"a":1}', headers=headers)
    reused = await client.post("/up/messages", data=b'{"a":2}', headers=headers)

    assert reused.status == 422
    assert reused.headers["Content-Type"] == "application/problem+json"
    problem = await reused.json(content_type=None)
    assert problem["type"].endswith("/idempotency-key-reused")
    assert problem["effect_key"] == reused.headers["Idem-Key"]
    # What the key already did, and that a re-run keeps its key.
    assert (problem["state"], problem["recorded_status"]) == ("completed", 200)
    assert "answered 200" in problem["detail"]
    assert "never a new key" in problem["detail"]
    assert effects.count("/messages") == 1


async def test_same_tool_call_with_other_content_is_another_effect(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    a = await client.post("/up/messages", data=b'{"a":1}', headers=TOOL_CALL)
    b = await client.post("/up/messages", data=b'{"a":2}', headers=TOOL_CALL)
    assert a.headers["Idem-Key"] != b.headers["Idem-Key"]
    assert effects.count("/messages") == 2


async def test_step_reused_with_other_content_is_refused(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    headers = {**TOOL_CALL, "Idem-Step": "post"}
    first = await client.post("/up/messages", data=b'{"a":1}', headers=headers)
    reused = await client.post("/up/messages", data=b'{"a":2}', headers=headers)
    problem = await reused.json(content_type=None)
    assert reused.status == 409
    assert problem["type"].endswith("/tool-call-already-acted")
    assert problem["recorded_answer"] == await first.json()
    assert effects.count("/messages") == 1


ONE_EFFECT = "tool_call_effects: one\nexternal_id: /id"
Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def one_effect(make_proxy: ProxyFactory, tmp_path: Path) -> tuple[Client, ProxyState]:
    """A proxy whose every route makes one effect per tool call."""
    return await make_proxy(policy=write_policy(tmp_path, ONE_EFFECT))


def blocked(state: ProxyState, kind: str) -> float | None:
    labels = {"upstream": "up", "route": "write", "kind": kind, "agent": "default"}
    return state.metrics.registry.get_sample_value("idemproxy_duplicates_blocked_total", labels)


async def test_a_reworded_rerun_is_told_what_the_tool_call_already_did(
    one_effect: tuple[Client, ProxyState], effects: EffectLog
) -> None:
    client, state = one_effect
    first = await client.post("/up/messages", data=b'{"content":"Deployed."}', headers=TOOL_CALL)
    rerun = await client.post(
        "/up/messages", data=b'{"content":"The deploy is done."}', headers=TOOL_CALL
    )

    problem = await rerun.json(content_type=None)
    assert rerun.status == 409
    assert rerun.headers["Idem-Outcome"] == "tool-call-already-acted"
    assert rerun.headers["x-should-retry"] == "false"
    assert rerun.headers["Idem-Key"] == first.headers["Idem-Key"]
    assert problem["type"].endswith("/tool-call-already-acted")
    assert (problem["state"], problem["recorded_status"]) == ("completed", 200)
    assert problem["external_id"] == "1"
    assert problem["recorded_answer"] == await first.json()
    assert problem["effect"] == "/v1/effects/" + quote(first.headers["Idem-Key"], safe="")
    assert "Idem-Step" in problem["detail"]
    assert "Idem-Step" in problem["another_effect"]
    assert effects.count("/messages") == 1
    assert blocked(state, "already_acted") == 1


async def test_steps_tell_the_effects_of_one_tool_call_apart(
    one_effect: tuple[Client, ProxyState], effects: EffectLog
) -> None:
    client, _ = one_effect
    for _ in range(2):
        outcomes = []
        for step in "123":
            body = orjson.dumps({"content": f"part {step}"})
            headers = {**TOOL_CALL, "Idem-Step": step}
            answer = await client.post("/up/messages", data=body, headers=headers)
            outcomes.append(answer.headers["Idem-Outcome"])
        assert len(set(outcomes)) == 1
    assert outcomes == ["replayed"] * 3
    assert effects.count("/messages") == 3


async def test_a_second_post_without_a_step_is_refused_and_not_sent(
    one_effect: tuple[Client, ProxyState], effects: EffectLog
) -> None:
    client, _ = one_effect
    await client.post("/up/messages", data=b'{"content":"1/2"}', headers=TOOL_CALL)
    second = await client.post("/up/messages", data=b'{"content":"2/2"}', headers=TOOL_CALL)

    assert second.status == 409
    assert "Idem-Step" in (await second.json(content_type=None))["detail"]
    assert effects.count("/messages") == 1


async def test_a_reworded_rerun_of_an_attempt_that_did_nothing_is_sent(
    one_effect: tuple[Client, ProxyState], effects: EffectLog
) -> None:
    client, _ = one_effect
    limited = await client.post("/up/status/429", data=b'{"content":"a"}', headers=TOOL_CALL)
    rerun = await client.post("/up/messages", data=b'{"content":"b"}', headers=TOOL_CALL)
    again = await client.post("/up/messages", data=b'{"content":"b"}', headers=TOOL_CALL)

    assert limited.status == 429
    assert rerun.headers["Idem-Outcome"] == "forwarded"
    assert rerun.headers["Idem-Key"] == limited.headers["Idem-Key"]
    assert again.headers["Idem-Outcome"] == "replayed"
    assert effects.count("/messages") == 1


async def test_a_reworded_rerun_of_an_unknown_outcome_waits_for_review(
    one_effect: tuple[Client, ProxyState], effects: EffectLog
) -> None:
    client, _ = one_effect
    lost = await client.post("/up/drop", data=b'{"content":"a"}', headers=TOOL_CALL)
    rerun = await client.post("/up/messages", data=b'{"content":"b"}', headers=TOOL_CALL)

    assert lost.status == 502
    assert rerun.status == 409
    assert rerun.headers["Idem-Outcome"] == "outcome-unknown"
    assert effects.count() == 1


async def test_volatile_fields_do_not_split_a_rerun(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, 'volatile_fields: ["/nonce", "/record/createdAt"]')
    client, _ = await make_proxy(policy=policy)
    first = {"text": "hi", "nonce": "111", "record": {"createdAt": "2026-01-01T00:00:00Z"}}
    rerun = {"record": {"createdAt": "2026-01-01T00:05:00Z"}, "nonce": "222", "text": "hi"}
    await client.post("/up/messages", data=orjson.dumps(first), headers=TOOL_CALL)
    again = await client.post("/up/messages", data=orjson.dumps(rerun), headers=TOOL_CALL)
    assert again.headers["Idem-Outcome"] == "replayed"
    assert effects.count("/messages") == 1


async def test_missing_key_is_refused_and_nothing_forwarded(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    response = await client.post("/up/messages", data=b"{}")
    problem = await response.json(content_type=None)
    assert response.status == 400
    assert problem["type"].endswith("/missing-idempotency-key")
    assert "Idem-Batch" in problem["detail"]
    assert response.headers["x-should-retry"] == "false"
    assert effects.count() == 0


async def test_passthrough_route_forwards_unprotected(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    client, state = await make_proxy(policy=write_policy(tmp_path, "on_missing_key: passthrough"))
    for _ in range(2):
        assert (await client.post("/up/messages", data=b"{}")).status == 200
    assert effects.count("/messages") == 2
    assert state.metrics.requests.labels("up", "write", "passthrough")._value.get() == 2


async def test_content_keyed_route_dedupes_identical_bodies(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    client, _ = await make_proxy(policy=write_policy(tmp_path, "on_missing_key: content"))
    await client.post("/up/messages", data=b'{"a":1}')
    again = await client.post("/up/messages", data=b'{"a":1}')
    assert again.headers["Idem-Outcome"] == "replayed"
    assert effects.count("/messages") == 1


@pytest.mark.parametrize(
    ("headers", "complaint"),
    [
        ({"Idempotency-Key": "has space"}, "Idempotency-Key"),
        ({"Idempotency-Key": "x" * 256}, "Idempotency-Key"),
        ({"Idem-Batch": "b"}, "together"),
        ({"Idem-Batch": "b", "Idem-Tool-Call": "c" * 300}, "Idem-Tool-Call"),
    ],
)
async def test_invalid_key_headers_get_400(
    make_proxy: ProxyFactory, effects: EffectLog, headers: dict[str, str], complaint: str
) -> None:
    client, _ = await make_proxy()
    response = await client.post("/up/messages", data=b"{}", headers=headers)
    problem = await response.json(content_type=None)
    assert response.status == 400
    assert problem["type"].endswith("/invalid-idempotency-key")
    assert complaint in problem["detail"]
    assert effects.count() == 0


async def test_duplicate_waits_then_gets_409_in_progress(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    client, _ = await make_proxy(policy=write_policy(tmp_path, "coalesce_wait_ms: 100"))
    original = asyncio.create_task(client.post("/up/slow?ms=600", data=b"{}", headers=TOOL_CALL))
    await asyncio.sleep(0.1)
    duplicate = await client.post("/up/slow?ms=600", data=b"{}", headers=TOOL_CALL)
    assert duplicate.status == 409
    assert duplicate.headers["Idem-Outcome"] == "request-in-progress"
    assert duplicate.headers["Retry-After"] == "1"
    assert duplicate.headers["x-should-retry"] == "true"
    assert (await original).status == 200
    assert effects.count("/slow") == 1


async def test_lease_of_a_dead_holder_expires_into_unknown(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)
    probe = await client.post("/up/status/429", data=b"{}", headers=TOOL_CALL)
    agent, _, effect_id = probe.headers["Idem-Key"].partition("/")
    # Another proxy claimed the key and died: nobody renews or settles its lease.
    record = await store.get(RecordKey(agent, effect_id))
    assert record is not None
    dead = ClaimRequest(record.key, record.fingerprint, EffectMeta(), lease_ms=50, ttl_s=60)
    assert isinstance(await store.claim(dead), Claimed)
    await asyncio.sleep(0.1)

    repeat = await client.post("/up/status/429", data=b"{}", headers=TOOL_CALL)
    assert repeat.status == 409
    assert repeat.headers["Idem-Outcome"] == "outcome-unknown"
    assert "lease expired" in (await repeat.json(content_type=None))["detail"]
    assert effects.count("/status/429") == 1


async def test_safe_reads_are_forwarded_every_time(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy()
    for _ in range(3):
        response = await client.get("/up/headers?x=1")
        assert response.status == 200
        assert response.headers["Idem-Outcome"] == "forwarded"
        assert "Idem-Key" not in response.headers
    assert state.metrics.requests.labels("up", "read", "forwarded")._value.get() == 3


async def test_an_effect_resolved_as_applied_replays_without_a_recorded_response(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)
    first = await client.post("/up/status/500", data=b"{}", headers=TOOL_CALL)
    agent, _, effect_id = first.headers["Idem-Key"].partition("/")
    resolution = Resolution(RecordState.COMPLETED, reason="operator saw the message posted")
    key = RecordKey(agent, effect_id)
    assert isinstance(
        await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution)), Resolved
    )

    repeat = await client.post("/up/status/500", data=b"{}", headers=TOOL_CALL)
    body = await repeat.json()
    assert repeat.status == 200
    assert repeat.headers["Idem-Outcome"] == "replayed"
    assert body["applied"] is True
    assert body["note"] == "operator saw the message posted"
    assert effects.count("/status/500") == 1
