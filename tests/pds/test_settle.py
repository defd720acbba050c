"""deleteRecord, putRecord and uploadBlob whose answer never came: each can be settled without
a human, so the retry gets its answer (200), never a 409 outcome-unknown.

A delete or a put leaves the repository in a state the proxy can read back; an upload is
content-addressed (the same bytes are the same blob), so sending it again is harmless.
"""

from __future__ import annotations

import uuid

import pytest
from atproto import models  # type: ignore[import-untyped]

from tests.pds.agent import SDK_UPLOADS_AS_DATA, Agents, Batch
from tests.pds.direct import (
    DELETE_RECORD,
    POST,
    PROFILE,
    PUT_RECORD,
    UPLOAD_BLOB,
    Account,
    create_record,
    get_record,
    records,
    rkey_of,
    upload_blob,
)
from tests.support.pds import ReferencePds
from tests.support.pds_relay import FaultKind, PdsRelay

pytestmark = pytest.mark.e2e


def test_a_delete_whose_answer_timed_out_is_reconciled_on_retry(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    post = create_record(
        pds.url, account, POST, {"text": "to go", "createdAt": "2026-01-01T00:00:00Z"}
    )
    agent = agents.start(account, batch.tool_call())
    data = models.ComAtprotoRepoDeleteRecord.Data(
        repo=account.did, collection=POST, rkey=rkey_of(post["uri"])
    )
    held = relay.arm(DELETE_RECORD, FaultKind.HOLD)
    timed_out = agent.attempt(
        lambda: agent.client.com.atproto.repo.delete_record(data), DELETE_RECORD
    )
    held.wait()
    assert (timed_out.status, timed_out.outcome) == (504, "upstream-timeout")
    assert records(pds.url, account.did) == []

    retried = agent.attempt(
        lambda: agent.client.com.atproto.repo.delete_record(data), DELETE_RECORD
    )

    assert (retried.status, retried.outcome) == (200, "reconciled")
    assert records(pds.url, account.did) == []


def test_a_put_whose_answer_timed_out_is_reconciled_on_retry(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    create_record(pds.url, account, PROFILE, {"displayName": "before"}, rkey="self")
    agent = agents.start(account, batch.tool_call())
    data = models.ComAtprotoRepoPutRecord.Data(
        repo=account.did,
        collection=PROFILE,
        rkey="self",
        record=models.AppBskyActorProfile.Record(display_name="after"),
    )
    held = relay.arm(PUT_RECORD, FaultKind.HOLD)
    timed_out = agent.attempt(lambda: agent.client.com.atproto.repo.put_record(data), PUT_RECORD)
    held.wait()
    assert (timed_out.status, timed_out.outcome) == (504, "upstream-timeout")

    retried = agent.attempt(lambda: agent.client.com.atproto.repo.put_record(data), PUT_RECORD)

    assert (retried.status, retried.outcome) == (200, "reconciled")
    profiles = records(pds.url, account.did, PROFILE)
    assert [profile["value"]["displayName"] for profile in profiles] == ["after"]
    assert retried.json()["uri"] == profiles[0]["uri"]
    assert get_record(pds.url, account.did, PROFILE, "self") == profiles[0]["value"]


@SDK_UPLOADS_AS_DATA
def test_an_upload_whose_answer_timed_out_is_sent_again_and_names_the_same_blob(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    blob = f"bytes of {uuid.uuid4()}".encode()
    agent = agents.start(account, batch.tool_call())
    held = relay.arm(UPLOAD_BLOB, FaultKind.HOLD)
    timed_out = agent.attempt(lambda: agent.client.upload_blob(blob), UPLOAD_BLOB)
    held.wait()
    assert (timed_out.status, timed_out.outcome) == (504, "upstream-timeout")

    retried = agent.attempt(lambda: agent.client.upload_blob(blob), UPLOAD_BLOB)

    assert retried.status == 200, retried
    assert relay.reached_pds(UPLOAD_BLOB) == 2  # re-sent: the first upload's answer was lost
    # The PDS names a blob by its content: uploading the same bytes again gives the same ref.
    direct = upload_blob(pds.url, account, blob, "application/octet-stream")
    assert retried.json()["blob"]["ref"]["$link"] == direct["ref"]["$link"]
