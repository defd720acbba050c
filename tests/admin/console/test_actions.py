"""Each console action does what the admin API's would, through the same LedgerService method,
with ``console (<address>)`` as its actor and the operator's note in the audit log; a refusal of
the ledger's is a page that says nothing changed."""

from __future__ import annotations

import time
from urllib.parse import quote

from idemproxy.admin.console.actions import SIGN_IN_DELAY_S
from idemproxy.admin.console.session import COOKIE
from idemproxy.store.approvals import ApprovalState
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.admin.conftest import AUTH, AdminClient, AdminFactory
from tests.admin.console.conftest import held, post_form, sign_in
from tests.ledger.conftest import make_effect

ACTOR = "console (127.0.0.1)"


def path(text: object) -> str:
    return quote(str(text), safe="")


async def last_audit(store: MemoryStore, agent: str) -> tuple[str, str, str, str]:
    entry = (await store.read_audit(agent))[-1]
    return entry.action, entry.actor, entry.after, entry.note


async def test_a_wrong_token_is_refused_slowly_and_signs_nothing_in(
    make_admin: AdminFactory,
) -> None:
    client = await make_admin(admin_token="admin-token-0123456789")
    started = time.monotonic()
    refused = await sign_in(client, "admin-token-012345678")
    assert time.monotonic() - started >= SIGN_IN_DELAY_S
    assert refused.status == 401
    assert "not this proxy&#39;s admin token" in await refused.text()
    assert COOKIE not in refused.cookies
    assert (await client.get("/console/")).url.path == "/console/signin"


async def test_the_admin_token_signs_in_and_sign_out_ends_it(make_admin: AdminFactory) -> None:
    client = await make_admin(admin_token="admin-token-0123456789")
    signed = await sign_in(client, "admin-token-0123456789")
    assert (signed.status, signed.headers["Location"]) == (303, "/console/?done=signed_in")
    assert "HttpOnly" in signed.headers["Set-Cookie"]
    assert (await client.get("/console/")).url.path == "/console/"
    out = await post_form(client, "/console/signout", {})
    assert (out.status, out.headers["Location"]) == (303, "/console/signin")
    assert (await client.get("/console/")).url.path == "/console/signin"


async def test_approve_lets_the_payload_through_once(
    console: AdminClient, store: MemoryStore
) -> None:
    approval = await held(store)
    url = f"/console/approvals/billing-bot/{approval.approval_id}"
    done = await post_form(console, f"{url}/decision", {"as": "approved", "note": "checked"})
    assert (done.status, done.headers["Location"]) == (303, f"{url}?done=approved")
    standing = await store.get_approval("billing-bot", approval.approval_id)
    assert standing is not None
    assert standing.state is ApprovalState.APPROVED
    assert (standing.actor, standing.note) == (ACTOR, "checked")
    assert await last_audit(store, "billing-bot") == (
        "approval.approve",
        ACTOR,
        "approved",
        "checked",
    )
    again = await post_form(console, f"{url}/decision", {"as": "denied", "note": "too late"})
    assert again.status == 409
    assert "Nothing changed" in await again.text()


async def test_deny_keeps_the_note_for_the_agent(console: AdminClient, store: MemoryStore) -> None:
    approval = await held(store)
    url = f"/console/approvals/billing-bot/{approval.approval_id}/decision"
    done = await post_form(console, url, {"as": "denied", "note": "customer asked to stop"})
    assert done.status == 303
    standing = await store.get_approval("billing-bot", approval.approval_id)
    assert standing is not None
    assert standing.state is ApprovalState.DENIED
    assert standing.note == "customer asked to stop"


async def test_an_unknown_verdict_or_an_overlong_note_changes_nothing(
    console: AdminClient, store: MemoryStore
) -> None:
    approval = await held(store)
    url = f"/console/approvals/billing-bot/{approval.approval_id}/decision"
    assert (await post_form(console, url, {"as": "maybe"})).status == 400
    assert (await post_form(console, url, {"as": "approved", "note": "x" * 2001})).status == 400
    standing = await store.get_approval("billing-bot", approval.approval_id)
    assert standing is not None
    assert standing.state is ApprovalState.AWAITING


async def test_resolve_as_applied_or_not_applied(console: AdminClient, store: MemoryStore) -> None:
    applied = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    freed = await make_effect(store, "bot", "b1", "c2", RecordState.UNKNOWN)
    for key, verdict, state in (
        (applied, "applied", RecordState.COMPLETED),
        (freed, "not_applied", RecordState.NOT_APPLIED),
    ):
        url = f"/console/effects/{path(key)}"
        done = await post_form(console, f"{url}/resolution", {"as": verdict, "note": "checked"})
        assert (done.status, done.headers["Location"]) == (303, f"{url}?done={verdict}")
        record = await store.get(key)
        assert record is not None
        assert record.state is state
    action, actor, _, note = await last_audit(store, "bot")
    assert (action, actor, note) == ("review.resolve", ACTOR, "checked")


async def test_retry_frees_a_failed_effect(console: AdminClient, store: MemoryStore) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, status=500)
    url = f"/console/effects/{path(key)}"
    done = await post_form(console, f"{url}/retry", {"note": "upstream fixed"})
    assert (done.status, done.headers["Location"]) == (303, f"{url}?done=retried")
    record = await store.get(key)
    assert record is not None
    assert record.state is RecordState.NOT_APPLIED
    again = await post_form(console, f"{url}/retry", {})
    assert again.status == 409


async def test_pause_then_resume_an_agent(console: AdminClient, store: MemoryStore) -> None:
    await make_effect(store, "team/bot", "b1", "c1", RecordState.COMPLETED)
    url = "/console/agents/team%2Fbot"
    paused = await post_form(console, f"{url}/pause", {"note": "rotating keys"})
    assert (paused.status, paused.headers["Location"]) == (303, f"{url}?done=paused")
    control = await store.read_control("team/bot")
    assert control.pause is not None
    assert control.pause.actor == ACTOR
    page = await (await console.get(url)).text()
    assert f"{url}/resume" in page
    assert "rotating keys" in page
    resumed = await post_form(console, f"{url}/resume", {"note": "rotated"})
    assert resumed.status == 303
    assert (await store.read_control("team/bot")).pause is None
    action, actor, _, note = await last_audit(store, "team/bot")
    assert (action, actor, note) == ("agent.resume", ACTOR, "rotated")


async def test_recover_a_batch_with_the_strategy_chosen(
    console: AdminClient, store: MemoryStore
) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, status=500)
    url = "/console/agents/bot/batches/b1"
    done = await post_form(console, f"{url}/recover", {"strategy": "restart", "note": "re-run"})
    plan = await done.text()
    assert done.status == 200
    assert "Recovered (restart)" in plan
    assert str(key) in plan  # cleared: the re-run sends it afresh
    action, actor, _, note = await last_audit(store, "bot")
    assert (action, actor, note) == ("recover.restart", ACTOR, "re-run")
    assert await store.get(key) is None  # freed and cleared for the re-run
    bad = await post_form(console, f"{url}/recover", {"strategy": "sideways"})
    assert bad.status == 400


async def test_an_action_on_nothing_is_a_404_page(console: AdminClient) -> None:
    missing = await post_form(console, "/console/agents/nobody/resume", {})
    assert missing.status == 404
    key = RecordKey("bot", "tc:b:c:d-0")
    gone = await post_form(console, f"/console/effects/{path(key)}/resolution", {"as": "applied"})
    assert gone.status == 404


async def test_the_api_sees_what_the_console_did(console: AdminClient, store: MemoryStore) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    await post_form(console, "/console/agents/bot/pause", {"note": "hold on"})
    agent = await (await console.get("/v1/agents/bot", headers=AUTH)).json()
    assert (agent["state"], agent["actor"]) == ("paused", ACTOR)
