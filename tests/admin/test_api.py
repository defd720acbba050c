"""The admin JSON API: the token guard, problem documents, and each resource (records, the
review queue, agents' status, pause and resume, compensation plans), with the actor and its
address in the audit log."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.service import LedgerService
from idemproxy.store.approvals import HoldRequest
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import EffectMeta, RecordKey, RecordState
from tests.admin.conftest import AUTH, TOKEN, AdminClient, AdminFactory
from tests.ledger.conftest import make_effect

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def path_of(key: RecordKey) -> str:
    return quote(str(key), safe="")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
)
async def test_without_the_token_nothing_about_records_leaks(
    admin: AdminClient, store: MemoryStore, headers: dict[str, str]
) -> None:
    key = await make_effect(store, "bot", "secret-batch", "c1", RecordState.UNKNOWN)
    for path in ("/v1/status", "/v1/review", f"/v1/effects/{path_of(key)}", "/v1/nothing-here"):
        response = await admin.get(path, headers=headers)
        body = await response.text()
        assert response.status == 401
        assert response.content_type == PROBLEM
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "secret-batch" not in body
        assert "bot" not in body
    resolve = await admin.post(
        f"/v1/review/{path_of(key)}/resolution", json={"as": "applied"}, headers=headers
    )
    assert resolve.status == 401
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.UNKNOWN


async def test_probes_and_metrics_stay_open(admin: AdminClient) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await admin.get(path)).status == 200


async def test_the_token_opens_the_api(admin: AdminClient) -> None:
    response = await admin.get("/v1/status", headers=AUTH)
    assert response.status == 200
    assert (await response.json())["unknown"] == 0


async def test_without_a_configured_token_the_loopback_api_is_open(
    make_admin: AdminFactory,
) -> None:
    admin = await make_admin()
    assert (await admin.get("/v1/status")).status == 200


async def test_unknown_agents_batches_and_keys_are_404_problems(
    admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    for path in (
        "/v1/agents/nobody/batches/b1",
        "/v1/agents/bot/batches/nope",
        f"/v1/effects/{quote('bot/tc:none', safe='')}",
        f"/v1/review/{quote('bot/tc:none', safe='')}",
        "/v1/agents/nobody/audit",
        "/v1/agents/nobody/events",
        "/v1/review?agent=nobody",
    ):
        response = await admin.get(path, headers=AUTH)
        assert response.status == 404, path
        assert response.content_type == PROBLEM
        problem = await response.json()
        assert problem["type"].endswith("/not-found")
        assert problem["status"] == 404
        assert problem["detail"]


async def test_review_resolve_then_a_second_decision_gets_409_with_the_state(
    admin: AdminClient, store: MemoryStore
) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    queue = await (await admin.get("/v1/review", headers=AUTH)).json()
    assert [item["effect_key"] for item in queue["items"]] == [str(key)]
    item = await admin.get(queue["items"][0]["review"], headers=AUTH)
    assert (await item.json())["state"] == "unknown"

    resolution = {"as": "applied", "note": "seen", "actor": "carol", "external_id": "m-1"}
    first = await admin.post(f"/v1/review/{path_of(key)}/resolution", json=resolution, headers=AUTH)
    again = {"as": "not_applied", "actor": "dave"}
    second = await admin.post(f"/v1/review/{path_of(key)}/resolution", json=again, headers=AUTH)

    assert first.status == 200
    assert (await first.json())["external_id"] == "m-1"
    assert second.status == 409
    problem = await second.json()
    assert problem["type"].endswith("/state-conflict")
    assert problem["state"] == "completed"
    audit = await (await admin.get("/v1/agents/bot/audit", headers=AUTH)).json()
    [entry] = audit["entries"]
    assert entry["actor"].startswith("carol (admin API from 127.0.0.1")
    assert (entry["before"], entry["after"], entry["note"]) == ("unknown", "completed", "seen")


async def test_bad_requests_are_400_problems(admin: AdminClient, store: MemoryStore) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    resolution = f"/v1/review/{path_of(key)}/resolution"
    for body in (b"not json", b"[1, 2]", b'{"as": "maybe"}', b'{"as": "applied", "note": 5}'):
        response = await admin.post(resolution, data=body, headers={**AUTH, **JSON})
        assert response.status == 400, body
        assert (await response.json())["type"].endswith("/invalid-request")
    assert (await admin.get("/v1/review?limit=lots", headers=AUTH)).status == 400


async def test_batch_status_and_recovery(admin: AdminClient, store: MemoryStore) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    freed = await make_effect(store, "bot", "b1", "c2", RecordState.NOT_APPLIED)
    progress = await (await admin.get("/v1/agents/bot/batches/b1", headers=AUTH)).json()
    assert (progress["strategy"], progress["replay"]) == ("selective", ["c1"])
    assert progress["completed"][0]["external_id"] == "m-1"

    response = await admin.post(
        "/v1/agents/bot/batches/b1/recover", json={"strategy": "auto"}, headers=AUTH
    )
    plan = await response.json()
    assert response.status == 200
    assert plan["cleared"] == [str(freed)]
    assert (
        await admin.post("/v1/agents/bot/batches/b1/recover", json={}, headers=AUTH)
    ).status == 200


async def test_recovery_past_the_limit_is_429_with_retry_after(
    make_admin: AdminFactory, store: MemoryStore
) -> None:
    admin = await make_admin(**{"recovery.actions_per_minute": 1})
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    path = "/v1/agents/bot/batches/b1/recover"
    assert (await admin.post(path, json={})).status == 200
    limited = await admin.post(path, json={})
    assert limited.status == 429
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert (await limited.json())["type"].endswith("/rate-limited")


async def test_delivery_status_retry_and_the_event_stream(
    admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    events = await (await admin.get("/v1/agents/bot/events", headers=AUTH)).json()
    assert [event["type"] for event in events["events"]] == ["effect.completed"]
    after = events["events"][0]["event_id"]
    later = await admin.get(f"/v1/agents/bot/events?after={after}", headers=AUTH)
    assert (await later.json())["events"] == []
    deliveries = await (await admin.get("/v1/delivery", headers=AUTH)).json()
    assert deliveries["agents"][0] | {"backlog": 1, "parked": False} == deliveries["agents"][0]
    retry = await admin.post("/v1/agents/bot/delivery/retry", json={}, headers=AUTH)
    assert retry.status == 409
    assert "not parked" in (await retry.json())["detail"]


async def test_pause_status_and_resume_over_http(admin: AdminClient, store: MemoryStore) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    body = {"actor": "alice", "note": "rotating the token"}

    for path in ("/v1/agents/bot/pause", "/v1/agents/bot/resume"):
        assert (await admin.post(path, json=body)).status == 401
    paused = await admin.post("/v1/agents/bot/pause", json=body, headers=AUTH)
    status = await (await admin.get("/v1/agents/bot", headers=AUTH)).json()
    resumed = await admin.post("/v1/agents/bot/resume", json=body, headers=AUTH)
    again = await admin.post("/v1/agents/bot/resume", json=body, headers=AUTH)

    assert paused.status == 200
    assert (status["state"], status["paused_by"], status["reason"]) == (
        "paused", "operator", "rotating the token",
    )  # fmt: skip
    assert status["actor"].startswith("alice (admin API from 127.0.0.1")
    assert (resumed.status, (await resumed.json())["freed"]) == (200, [])
    assert (again.status, again.content_type) == (409, PROBLEM)
    assert "is not paused" in (await again.json())["detail"]
    entries = (await (await admin.get("/v1/agents/bot/audit", headers=AUTH)).json())["entries"]
    assert [entry["action"] for entry in entries] == ["agent.pause", "agent.resume"]


async def test_review_retry_over_http(admin: AdminClient, store: MemoryStore) -> None:
    failed = await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, status=403)
    path = f"/v1/review/{quote(str(failed), safe='')}/retry"

    freed = await admin.post(path, json={"actor": "alice"}, headers=AUTH)
    twice = await admin.post(path, json={"actor": "alice"}, headers=AUTH)

    assert (freed.status, (await freed.json())["state"]) == (200, "not_applied")
    assert twice.status == 409
    assert (await twice.json())["state"] == "not_applied"


async def test_compensation_of_an_unknown_batch_or_with_bad_headers_is_refused(
    admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    plan = "/v1/agents/bot/batches/{batch}/compensation"

    missing = await admin.get(plan.format(batch="nope"), headers=AUTH)
    bad = await admin.post(
        plan.format(batch="b1"), json={"headers": {"discord": "Bot x"}}, headers=AUTH
    )

    assert (missing.status, (await missing.json())["type"].rsplit("/", 1)[1]) == (404, "not-found")
    assert bad.status == 400
    assert "headers must look like" in (await bad.json())["detail"]


async def test_restart_from_last_external_over_http_gives_the_store_services_document(
    admin: AdminClient, store: MemoryStore
) -> None:
    for batch in ("b1", "b2"):
        await make_effect(store, "bot", batch, "c1", RecordState.COMPLETED, status=403)
        await make_effect(store, "bot", batch, "c2", RecordState.COMPLETED)
        await make_effect(store, "bot", batch, "c3", RecordState.COMPLETED, status=401)
    response = await admin.post(
        "/v1/agents/bot/batches/b1/recover",
        json={"strategy": "restart-from-last-external", "actor": "ops"},
        headers=AUTH,
    )
    over_http = await response.json()
    mode = RecoverMode.RESTART_FROM_LAST_EXTERNAL
    direct = await LedgerService(store).recover("bot", "b2", mode, "ops", "")

    assert response.status == 200
    assert (over_http["skip"], over_http["resume_from"]) == (["c1", "c2"], "c3")
    assert [key.split(":")[2] for key in over_http["cleared"]] == ["c3"]
    same = {
        **over_http,
        "batch": "b2",
        "cleared": [k.replace(":b1:", ":b2:") for k in over_http["cleared"]],
    }
    assert direct == same


async def test_a_rollback_needs_the_proxys_compensator_and_a_later_batch(
    admin: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    latest = await admin.get("/v1/agents/bot/batches/b1/rollback", headers=AUTH)
    missing = await admin.get("/v1/agents/bot/batches/nope/rollback", headers=AUTH)
    assert latest.status == 409
    assert "no later batch" in (await latest.json())["detail"]
    assert missing.status == 404


async def test_an_approval_is_listed_shown_and_decided_once(
    admin: AdminClient, store: MemoryStore
) -> None:
    meta = EffectMeta(batch="b1", tool_call="c1", upstream="stripe", method="POST")
    request = HoldRequest(RecordKey("bot", "c1"), "f", meta, "always", '{"a": 1}', 60_000, 1000)
    held = await store.hold(request)
    listing = await (await admin.get("/v1/approvals", headers=AUTH)).json()
    [item] = listing["items"]
    assert (item["approval_id"], item["summary"]) == (held.approval_id, '{"a": 1}')
    shown = await (await admin.get(item["link"], headers=AUTH)).json()
    assert shown["state"] == "awaiting_approval"

    decision = {"as": "denied", "note": "no", "actor": "carol"}
    first = await admin.post(item["link"] + "/decision", json=decision, headers=AUTH)
    assert first.status == 200
    assert (await first.json())["state"] == "denied"
    second = await admin.post(item["link"] + "/decision", json={"as": "approve"}, headers=AUTH)
    assert second.status == 409
    assert (await second.json())["state"] == "denied"
    bad = await admin.post(item["link"] + "/decision", json={"as": "sure"}, headers=AUTH)
    assert bad.status == 400
    missing = await admin.get("/v1/approvals/bot/ap_none", headers=AUTH)
    assert missing.status == 404
    [entry] = (await (await admin.get("/v1/agents/bot/audit", headers=AUTH)).json())["entries"]
    assert entry["actor"].startswith("carol (admin API from")
    assert (entry["action"], entry["after"], entry["note"]) == ("approval.deny", "denied", "no")
