"""What the console's pages show: the overview of what needs someone, each item with the forms
its state allows, the agent's audit log; never a recorded body; values from the agent as text."""

from __future__ import annotations

from urllib.parse import quote

from idemproxy.admin.console.pages import DONE
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Settlement,
    StoredResponse,
)
from tests.admin.conftest import AdminClient
from tests.admin.console.conftest import held
from tests.ledger.conftest import make_effect


def path(text: object) -> str:
    return quote(str(text), safe="")


async def completed(store: MemoryStore, status: int, body: bytes, batch: str = "b9") -> RecordKey:
    key = RecordKey("bot", f"tc:{batch}:c1:d-0")
    meta = EffectMeta(batch, "c1", "post_message", "discord", "POST", "/channels/1/messages")
    claim = await store.claim(ClaimRequest(key, "fp", meta, 30_000, 600))
    assert isinstance(claim, Claimed)
    response = StoredResponse(status, (("set-cookie", "session=s3cr3t"),), body)
    assert await store.settle(key, claim.fence, Settlement(RecordState.COMPLETED, response))
    return key


async def page_text(console: AdminClient, url: str, status: int = 200) -> str:
    response = await console.get(url)
    text = await response.text()
    assert response.status == status, text
    return text


async def test_the_overview_shows_what_needs_someone(
    console: AdminClient, store: MemoryStore
) -> None:
    unknown = await make_effect(store, "review-bot", "sync-3", "c1", RecordState.UNKNOWN)
    approval = await held(store)
    await make_effect(store, "quiet-bot", "calm-1", "c1", RecordState.COMPLETED)
    text = await page_text(console, "/console/")
    attention = text.split('id="attention"')[1].split("</section>")[0]
    assert "review-bot" in attention
    assert "quiet-bot" not in attention
    assert f"/console/effects/{path(unknown)}" in text
    assert f"/console/approvals/billing-bot/{approval.approval_id}" in text
    assert "/amount above 10000" in text
    assert "/console/agents/quiet-bot/batches/calm-1" in text  # a recent batch
    assert "1 completed, 0 failed" in text


async def test_ids_the_agent_chose_are_text_not_markup(
    console: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "<script>alert(1)</script>", "c1", RecordState.UNKNOWN)
    text = await page_text(console, "/console/")
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


async def test_an_approval_shows_its_redacted_summary_and_forms_while_it_awaits(
    console: AdminClient, store: MemoryStore
) -> None:
    approval = await held(store)
    url = f"/console/approvals/billing-bot/{approval.approval_id}"
    text = await page_text(console, url)
    assert "&#34;amount&#34;: &#34;25000&#34;" in text
    assert text.count(f"{url}/decision") == 2  # approve and deny
    assert 'name="as" value="approved"' in text
    assert 'name="as" value="denied"' in text


async def test_a_missing_approval_is_a_404_page(console: AdminClient) -> None:
    text = await page_text(console, "/console/approvals/billing-bot/ap_nothing", 404)
    assert "ap_nothing" in text


async def test_an_unknown_effect_offers_its_resolution(
    console: AdminClient, store: MemoryStore
) -> None:
    key = await make_effect(store, "team/bot", "b1", "c1", RecordState.UNKNOWN)
    text = await page_text(console, f"/console/effects/{path(key)}")
    assert f"/console/effects/{path(key)}/resolution" in text
    assert 'value="applied"' in text
    assert 'value="not_applied"' in text
    assert "/retry" not in text
    assert "/console/agents/team%2Fbot" in text


async def test_a_failed_effect_offers_retry_and_no_page_shows_a_body_or_header(
    console: AdminClient, store: MemoryStore
) -> None:
    key = await completed(store, 500, b'{"secret": "tok_live_0123"}')
    text = await page_text(console, f"/console/effects/{path(key)}")
    assert f"/console/effects/{path(key)}/retry" in text
    assert "/resolution" not in text
    assert "tok_live_0123" not in text
    assert "s3cr3t" not in text
    batch = await page_text(console, "/console/agents/bot/batches/b9")
    assert "tok_live_0123" not in batch
    assert "s3cr3t" not in batch


async def test_a_completed_effect_offers_nothing(console: AdminClient, store: MemoryStore) -> None:
    key = await completed(store, 200, b"{}")
    text = await page_text(console, f"/console/effects/{path(key)}")
    assert "/retry" not in text
    assert "/resolution" not in text


async def test_the_agent_page_has_its_state_batches_and_audit_log(
    console: AdminClient, store: MemoryStore
) -> None:
    await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    text = await page_text(console, "/console/agents/bot")
    assert "/console/agents/bot/pause" in text
    assert "/resume" not in text
    assert "/console/agents/bot/batches/b1" in text
    assert "No operator action yet." in text


async def test_the_batch_page_lists_its_effects_and_offers_every_recovery(
    console: AdminClient, store: MemoryStore
) -> None:
    key = await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    text = await page_text(console, "/console/agents/bot/batches/b1")
    assert f"/console/effects/{path(key)}" in text
    assert "/console/agents/bot/batches/b1/recover" in text
    for mode in ("auto", "restart", "restart_from_last_external", "abandon"):
        assert f'<option value="{mode}">' in text


async def test_an_unknown_agent_is_a_404_page(console: AdminClient) -> None:
    text = await page_text(console, "/console/agents/nobody", 404)
    assert "nobody" in text


async def test_a_done_word_shows_its_own_message_and_nothing_from_the_url(
    console: AdminClient,
) -> None:
    text = await page_text(console, "/console/?done=approved")
    assert DONE["approved"].replace("'", "&#39;") in text
    forged = await page_text(console, "/console/?done=<b>you+were+hacked</b>")
    assert "hacked" not in forged
