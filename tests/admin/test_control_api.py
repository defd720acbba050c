"""The admin API's agent routes (status, pause, resume), review retry and compensation plans:
behind the token, with the actor and its address in the audit log, problems for bad input."""

from __future__ import annotations

from urllib.parse import quote

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from tests.admin.conftest import AUTH, AdminClient
from tests.ledger.conftest import make_effect

PROBLEM = "application/problem+json"


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
