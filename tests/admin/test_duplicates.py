"""``GET /v1/duplicates``: the repeats the proxy blocked, by agent and batch."""

from __future__ import annotations

from idemproxy.admin.duplicates import BLOCKED
from tests.admin.conftest import AUTH, AdminClient

PROBLEM = "application/problem+json"


def blocked_by(admin: AdminClient, agent: str, batch: str, route: str, times: int) -> None:
    assert admin.app is not None
    for _ in range(times):
        admin.app[BLOCKED].count(agent, batch, "discord", route, "replayed")


async def test_the_summary_names_the_agent_and_batch_that_keep_repeating(
    admin: AdminClient,
) -> None:
    blocked_by(admin, "notes-bot", "nightly-7", "create_message", 4)
    blocked_by(admin, "notes-bot", "nightly-6", "create_reaction", 1)
    blocked_by(admin, "helper", "h1", "create_message", 2)

    response = await admin.get("/v1/duplicates", headers=AUTH)
    summary = await response.json()

    assert response.status == 200
    assert summary["blocked"] == 7
    assert [a["agent"] for a in summary["agents"]] == ["notes-bot", "helper"]
    bot = summary["agents"][0]
    assert [b["batch"] for b in bot["batches"]] == ["nightly-7", "nightly-6"]
    assert bot["batches"][0]["top_routes"] == [
        {"upstream": "discord", "route": "create_message", "blocked": 4}
    ]


async def test_one_agent_and_a_number_of_batches_can_be_asked_for(admin: AdminClient) -> None:
    blocked_by(admin, "notes-bot", "b1", "create_message", 2)
    blocked_by(admin, "notes-bot", "b2", "create_message", 1)
    blocked_by(admin, "helper", "h1", "create_message", 1)

    response = await admin.get("/v1/duplicates?agent=notes-bot&limit=1", headers=AUTH)
    (bot,) = (await response.json())["agents"]

    assert [b["batch"] for b in bot["batches"]] == ["b1"]
    assert bot["batches_not_shown"] == 1


async def test_a_bad_limit_is_refused_with_what_to_send(admin: AdminClient) -> None:
    response = await admin.get("/v1/duplicates?limit=lots", headers=AUTH)
    problem = await response.json(content_type=None)
    assert response.status == 400
    assert response.content_type == PROBLEM
    assert "a whole number from 1 to 1000" in problem["detail"]


async def test_the_summary_needs_the_admin_token(admin: AdminClient) -> None:
    blocked_by(admin, "notes-bot", "secret-batch", "create_message", 1)
    response = await admin.get("/v1/duplicates")
    assert response.status == 401
    assert "secret-batch" not in await response.text()
