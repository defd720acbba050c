"""The compensations the shipped packs declare, filled from what each API really answers."""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import parse_qsl

import orjson
import pytest

from idemproxy.ledger.compensator import (
    Compensator,
    Outgoing,
    Sent,
    UndoState,
    compensation_headers,
    compensation_key,
)
from idemproxy.policies.loader import load_policy
from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState, StoredResponse

URI = "at://did:plc:ewvi7nxzyoun6zhxrhs64oiz/app.bsky.feed.post/3l4z7fgrkpc2a"


class NothingSent:
    """Planning sends nothing; a test that reached this would be wrong."""

    async def send(self, outgoing: Outgoing, credentials: Mapping[str, str]) -> Sent:
        pytest.fail(f"planning sent {outgoing}")


def effect(upstream: str, method: str, path: str, answer: Mapping[str, object]) -> EffectRecord:
    meta = EffectMeta("order-7", "call-1", "act", upstream, method, path)
    response = StoredResponse(200, (("content-type", "application/json"),), orjson.dumps(answer))
    return EffectRecord(
        RecordKey("bot", "tc:order-7:call-1:d-0"), RecordState.COMPLETED, 1, "fp", meta,
        response=response,
    )  # fmt: skip


def plan(record: EffectRecord) -> Outgoing:
    policies = {name: load_policy(name) for name in ("stripe", "discord", "bluesky", "openai")}
    item = Compensator(policies, NothingSent()).plan_item(record, None)
    assert item.undo.state is UndoState.PLANNED, item.undo.detail
    assert item.outgoing is not None
    return item.outgoing


def test_a_stripe_payment_is_refunded() -> None:
    sent = plan(effect("stripe", "POST", "/v1/payment_intents", {"id": "pi_3Mtw", "amount": 7}))
    assert (sent.method, sent.path) == ("POST", "/v1/refunds")
    assert dict(parse_qsl(sent.body.decode())) == {"payment_intent": "pi_3Mtw"}
    assert ("Content-Type", "application/x-www-form-urlencoded") in sent.headers


def test_a_discord_message_is_deleted() -> None:
    sent = plan(
        effect("discord", "POST", "/v10/channels/81/messages", {"id": "1200000000000000001"})
    )
    assert (sent.method, sent.path) == ("DELETE", "/v10/channels/81/messages/1200000000000000001")
    assert sent.body == b""


def test_a_webhook_message_is_deleted_in_its_channel_without_the_token() -> None:
    # The record shows the webhook's token as {token}: the delete goes through the channel.
    answer = {"id": "1200000000000000002", "channel_id": "81", "webhook_id": "5"}
    sent = plan(effect("discord", "POST", "/v10/webhooks/5/{token}", answer))
    assert (sent.method, sent.path) == ("DELETE", "/v10/channels/81/messages/1200000000000000002")


def test_a_bluesky_record_is_deleted_by_the_parts_of_its_uri_while_unchanged() -> None:
    created = {"uri": URI, "cid": "bafyrei"}
    sent = plan(effect("bluesky", "POST", "/xrpc/com.atproto.repo.createRecord", created))
    assert (sent.method, sent.path) == ("POST", "/xrpc/com.atproto.repo.deleteRecord")
    assert orjson.loads(sent.body) == {
        "repo": "did:plc:ewvi7nxzyoun6zhxrhs64oiz",
        "collection": "app.bsky.feed.post",
        "rkey": "3l4z7fgrkpc2a",
        # The PDS refuses the delete if the record is no longer the one the create made.
        "swapRecord": "bafyrei",
    }


def test_an_openai_file_is_deleted() -> None:
    sent = plan(effect("openai", "POST", "/v1/files", {"id": "file-abc123", "object": "file"}))
    assert (sent.method, sent.path) == ("DELETE", "/v1/files/file-abc123")


def test_a_compensation_carries_keys_derived_from_the_effect_it_undoes() -> None:
    record = effect("stripe", "POST", "/v1/payment_intents", {"id": "pi_1"})
    headers = dict(plan(record).headers)

    assert headers["Idem-Agent"] == "bot"
    assert (headers["Idem-Batch"], headers["Idem-Tool-Call"]) == ("order-7", "compensate:call-1")
    assert headers["Idem-Compensates"] == str(record.key)
    assert compensation_headers(record) == compensation_headers(record)
    other = effect("stripe", "POST", "/v1/payment_intents", {"id": "pi_2"})
    other = EffectRecord(RecordKey("bot", "tc:order-7:call-1:d-1"), other.state, 1, "fp",
                         other.meta, response=other.response)  # fmt: skip
    assert compensation_key(record) != compensation_key(other)
    assert compensation_key(record).effect_id.startswith("tc:order-7:compensate%3Acall-1:s-")


def test_a_route_without_compensation_cannot_be_undone() -> None:
    record = effect("stripe", "POST", "/v1/customers", {"id": "cus_1"})
    policies = {"stripe": load_policy("stripe")}
    item = Compensator(policies, NothingSent()).plan_item(record, None)
    assert (item.undo.state, item.outgoing) == (UndoState.CANNOT, None)
    assert item.undo.detail == "route 'write' declares no compensation"


def gzipped(record: EffectRecord, *, truncated: bool = False) -> EffectRecord:
    """``record`` as it is stored when the agent asked for gzip and the upstream obliged."""
    assert record.response is not None
    body = gzip.compress(record.response.body)
    headers = (*record.response.headers, ("Content-Encoding", "gzip"))
    stored = StoredResponse(200, headers, body[: len(body) // 2] if truncated else body, truncated)
    return replace(record, response=stored)


def test_a_message_whose_answer_was_gzipped_is_deleted_by_its_id() -> None:
    message = effect("discord", "POST", "/v10/channels/81/messages", {"id": "1200000000000000001"})
    sent = plan(gzipped(message))
    assert (sent.method, sent.path) == ("DELETE", "/v10/channels/81/messages/1200000000000000001")


def test_a_gzipped_answer_recorded_only_in_part_says_why_it_cannot_be_undone() -> None:
    message = effect("discord", "POST", "/v10/channels/81/messages", {"id": "1200000000000000001"})
    policies = {"discord": load_policy("discord")}
    item = Compensator(policies, NothingSent()).plan_item(gzipped(message, truncated=True), None)
    assert (item.undo.state, item.outgoing) == (UndoState.INVALID, None)
    assert "recorded only in part" in item.undo.detail
