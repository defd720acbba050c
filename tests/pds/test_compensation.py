"""A create on a record key that is already taken, and undoing a batch with
`idemproxy recover --strategy compensate`: only what the batch made may be deleted.

A profile lives at the fixed key ``self``. A create there when another client already made the
profile fails on the PDS (500), and reading the key back finds a record, but not the one the
agent sent: the agent must be told it failed, and compensating the batch must leave the other
client's profile alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from atproto import models  # type: ignore[import-untyped]

from tests.pds.agent import Agents, Batch
from tests.pds.direct import (
    CREATE_RECORD,
    DELETE_RECORD,
    POST,
    PROFILE,
    Account,
    create_record,
    get_record,
    records,
)
from tests.support.pds import ReferencePds
from tests.support.pds_relay import PdsRelay
from tests.support.processes import ServedProxy

pytestmark = pytest.mark.e2e


def compensate(proxy: ServedProxy, batch: Batch, account: Account) -> tuple[int, str]:
    """`idemproxy recover AGENT BATCH --strategy compensate --yes`, as an operator runs it,
    with the account's credential for the deletes (the proxy keeps none)."""
    script = Path(sys.executable).parent / "idemproxy"
    argv = [str(script), "recover", batch.agent, batch.name, "--strategy", "compensate", "--yes",
            "--admin-url", proxy.admin_url,
            "--header", f"bluesky=Authorization: {account.authorization}"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    return done.returncode, done.stdout + done.stderr


def display_name(pds: ReferencePds, account: Account) -> object:
    profile = get_record(pds.url, account.did, PROFILE, "self")
    return None if profile is None else profile.get("displayName")


def test_a_create_on_a_taken_record_key_fails_and_its_compensation_deletes_nothing(
    pds: ReferencePds,
    relay: PdsRelay,
    proxy: ServedProxy,
    agents: Agents,
    account: Account,
    batch: Batch,
) -> None:
    create_record(pds.url, account, PROFILE, {"displayName": "A"}, rkey="self")
    agent = agents.start(account, batch.tool_call())
    data = models.ComAtprotoRepoCreateRecord.Data(
        repo=account.did,
        collection=PROFILE,
        rkey="self",
        record=models.AppBskyActorProfile.Record(display_name="B"),
    )

    refused = agent.attempt(
        lambda: agent.client.com.atproto.repo.create_record(data), CREATE_RECORD
    )

    # The PDS's own answer to a taken key, not a read-back of someone else's record.
    assert (refused.status, refused.outcome) != (200, "reconciled")
    assert refused.status == 500, refused
    assert display_name(pds, account) == "A"

    code, output = compensate(proxy, batch, account)
    assert display_name(pds, account) == "A", (code, output)
    assert relay.reached_pds(DELETE_RECORD) == 0, (code, output)


def test_compensating_a_batch_deletes_exactly_the_post_it_made(
    pds: ReferencePds,
    relay: PdsRelay,
    proxy: ServedProxy,
    agents: Agents,
    account: Account,
    batch: Batch,
) -> None:
    others = create_record(
        pds.url, account, POST, {"text": "not ours", "createdAt": "2026-01-01T00:00:00Z"}
    )
    agent = agents.start(account, batch.tool_call())
    ours = agent.client.send_post("ours", profile_identify=account.did)
    assert {r["uri"] for r in records(pds.url, account.did)} == {ours.uri, others["uri"]}

    code, output = compensate(proxy, batch, account)

    assert code == 0, output
    assert [r["uri"] for r in records(pds.url, account.did)] == [others["uri"]]
    assert relay.reached_pds(DELETE_RECORD) == 1, output
