"""Posts through the proxy on the real PDS: a repeat, a timeout, a lost request, record order,
and a post with an image. Each is checked in the PDS's own repository, not in what the agent
was told."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from atproto_client.exceptions import AtProtocolError  # type: ignore[import-untyped]

from tests.pds.agent import SDK_UPLOADS_AS_DATA, Agents, Batch
from tests.pds.direct import (
    CREATE_RECORD,
    POST,
    UPLOAD_BLOB,
    Account,
    create_record,
    records,
    rkey_of,
    tid_time,
)
from tests.support.pds import ReferencePds
from tests.support.pds_relay import Fate, FaultKind, PdsRelay

pytestmark = pytest.mark.e2e

# How far a record key's time may be from the moment its record was made.
TID_SLACK = timedelta(minutes=1)


def uris(pds: ReferencePds, account: Account) -> list[str]:
    return [record["uri"] for record in records(pds.url, account.did)]


def test_a_restarted_agent_repeating_a_post_gets_it_replayed_and_one_record_exists(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    first = agents.start(account, batch.tool_call())
    made = first.client.send_post("shipped", profile_identify=account.did)
    # The restarted agent builds the same post; the SDK stamps it with a new createdAt.
    rerun = agents.start(account, batch.tool_call())
    again = rerun.client.send_post("shipped", profile_identify=account.did)

    assert first.answer(CREATE_RECORD).outcome == "forwarded"
    sent = first.sent(CREATE_RECORD) + rerun.sent(CREATE_RECORD)
    assert sent[0]["record"]["createdAt"] != sent[1]["record"]["createdAt"]
    assert rerun.answer(CREATE_RECORD).outcome == "replayed"
    assert (again.uri, again.cid) == (made.uri, made.cid)
    assert uris(pds, account) == [made.uri]
    assert relay.reached_pds(CREATE_RECORD) == 1


def test_a_post_whose_answer_timed_out_is_reconciled_on_retry_not_posted_again(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    held = relay.arm(CREATE_RECORD, FaultKind.HOLD)
    agent = agents.start(account, batch.tool_call())
    with pytest.raises(AtProtocolError):
        agent.client.send_post("held", profile_identify=account.did)
    held.wait()
    timed_out = agent.answer(CREATE_RECORD)
    assert (timed_out.status, timed_out.outcome) == (504, "upstream-timeout")
    applied = records(pds.url, account.did)
    assert len(applied) == 1  # the PDS made the post; only its answer was lost

    again = agent.client.send_post("held", profile_identify=account.did)

    retried = agent.answer(CREATE_RECORD)
    assert (retried.status, retried.outcome) == (200, "reconciled")
    assert (again.uri, again.cid) == (applied[0]["uri"], applied[0]["cid"])
    assert uris(pds, account) == [again.uri]
    assert relay.reached_pds(CREATE_RECORD) == 1


def test_a_post_lost_before_the_pds_is_sent_once_on_retry(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    dropped = relay.arm(CREATE_RECORD, FaultKind.DROP)
    agent = agents.start(account, batch.tool_call())
    with pytest.raises(AtProtocolError):
        agent.client.send_post("lost", profile_identify=account.did)
    dropped.wait()
    lost = agent.answer(CREATE_RECORD)
    assert (lost.status, lost.outcome) == (502, "upstream-disconnected")
    assert uris(pds, account) == []

    again = agent.client.send_post("lost", profile_identify=account.did)

    assert agent.answer(CREATE_RECORD).status == 200
    assert uris(pds, account) == [again.uri]
    assert [p.fate for p in relay.passages(CREATE_RECORD)] == [Fate.DROPPED, Fate.FORWARDED]


def test_posts_through_the_proxy_keep_their_place_among_others_and_carry_their_time(
    pds: ReferencePds, agents: Agents, account: Account, batch: Batch
) -> None:
    agent = agents.start(account, {})
    made: list[tuple[str, datetime, datetime]] = []  # (rkey, before, after) of proxy posts
    order: list[str] = []
    for index in range(3):
        if index:
            text = f"direct {index}"
            create_record(pds.url, account, POST, {"text": text, "createdAt": now_iso()})
            order.append(text)
        text = f"proxied {index}"
        agent.tag(batch.tool_call(f"post-{index}"))
        before = datetime.now(UTC)
        post = agent.client.send_post(text, profile_identify=account.did)
        made.append((rkey_of(post.uri), before, datetime.now(UTC)))
        order.append(text)

    # listRecords sorts by record key, so a key out of time lists its post out of place.
    listed = records(pds.url, account.did)
    keyed = [(r["value"]["text"], tid_time(rkey_of(r["uri"])).isoformat()) for r in listed]
    assert [text for text, _ in keyed] == order, keyed
    for rkey, before, after in made:
        assert before - TID_SLACK <= tid_time(rkey) <= after + TID_SLACK, rkey


@SDK_UPLOADS_AS_DATA
def test_a_repeated_image_post_is_replayed_with_its_upload_and_one_post_exists(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    image = tiny_png()
    first = agents.start(account, batch.tool_call())
    made = first.client.send_image("a dot", image, "one red pixel", profile_identify=account.did)
    rerun = agents.start(account, batch.tool_call())
    again = rerun.client.send_image("a dot", image, "one red pixel", profile_identify=account.did)

    assert rerun.answer(UPLOAD_BLOB).outcome == "replayed"
    assert rerun.answer(CREATE_RECORD).outcome == "replayed"
    assert (again.uri, again.cid) == (made.uri, made.cid)
    posts = records(pds.url, account.did)
    assert [post["uri"] for post in posts] == [made.uri]
    blob = first.answer(UPLOAD_BLOB).json()["blob"]["ref"]["$link"]
    assert posts[0]["value"]["embed"]["images"][0]["image"]["ref"]["$link"] == blob
    assert (relay.reached_pds(UPLOAD_BLOB), relay.reached_pds(CREATE_RECORD)) == (1, 1)


@SDK_UPLOADS_AS_DATA
def test_an_image_post_whose_answer_timed_out_is_read_back_equal_to_what_was_sent(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    # The read-back compares the stored value, blob reference and image list included, with
    # what the agent sent: the PDS must keep them as sent for the post to count as this one.
    held = relay.arm(CREATE_RECORD, FaultKind.HOLD)
    agent = agents.start(account, batch.tool_call())
    image = tiny_png()
    with pytest.raises(AtProtocolError):
        agent.client.send_image("a dot", image, "one red pixel", profile_identify=account.did)
    held.wait()

    again = agent.client.send_image("a dot", image, "one red pixel", profile_identify=account.did)

    assert agent.answer(CREATE_RECORD).outcome == "reconciled"
    assert uris(pds, account) == [again.uri]
    assert relay.reached_pds(CREATE_RECORD) == 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def tiny_png() -> bytes:
    """A valid 1x1 PNG: the PDS checks that an image embed's blob is an image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )
