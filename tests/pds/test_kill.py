"""A proxy SIGKILLed while the PDS's answer to a post is on its way: after a restart on the same
store, the repeat is settled by reading the record back, and the PDS holds one post."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from atproto_client.exceptions import AtProtocolError  # type: ignore[import-untyped]

from idemproxy.policies.loader import pack_text
from tests.pds.agent import Agent, Agents, Batch
from tests.pds.conftest import write_config
from tests.pds.direct import CREATE_RECORD, Account, records
from tests.support.pds import ReferencePds
from tests.support.pds_relay import FaultKind, PdsRelay
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

# The dead proxy's attempt holds the key until its lease runs out; the shipped 30 s would make
# this the slowest test by far, so the shipped pack runs here with a short one.
LEASE_MS = 2_000
# The proxy must be killed while it still waits for the answer, never time out first.
READ_TIMEOUT_S = 30.0
HOLD_S = READ_TIMEOUT_S + 5
# Long enough for the lease to lapse and the repeat to settle it, with room for a slow machine.
SETTLE_S = 30.0


def short_lease_pack(directory: Path) -> Path:
    """The shipped bluesky pack as it is in src/, with every effect route's lease shortened."""
    pack: dict[str, Any] = yaml.safe_load(pack_text("bluesky"))
    for route in [*pack["routes"], pack["default"]]:
        if route.get("effect", "external") != "safe":
            route["lease_ms"] = LEASE_MS
    policy = directory / "bluesky-short-lease.yaml"
    policy.write_text(yaml.safe_dump(pack, sort_keys=False))
    return policy


def post_once_settled(agent: Agent, account: Account, text: str) -> Any:
    """Post, repeating while the dead proxy's attempt still holds the key (409 in progress)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            return agent.client.send_post(text, profile_identify=account.did)
        except AtProtocolError:
            answer = agent.answer(CREATE_RECORD)
            if answer.outcome != "request-in-progress" or time.monotonic() > deadline:
                raise
        # The proxy waited coalesce_wait_ms before each 409; no need to wait more here.


def test_a_post_whose_proxy_was_killed_mid_answer_is_reconciled_after_a_restart(
    pds: ReferencePds,
    relay: PdsRelay,
    agents: Agents,
    account: Account,
    batch: Batch,
    tmp_path: Path,
) -> None:
    # A SQLite file: the record of the attempt must outlive the killed process.
    store = f"sqlite:///{tmp_path}/store.db"
    policy = short_lease_pack(tmp_path)
    config = write_config(tmp_path, relay.url, store, read_timeout_s=READ_TIMEOUT_S, policy=policy)
    killed = ServedProxy(tmp_path, "--config", str(config))
    with running(killed):
        held = relay.arm(CREATE_RECORD, FaultKind.HOLD, hold_s=HOLD_S)
        agent = agents.start(account, batch.tool_call(), via=killed)
        with ThreadPoolExecutor(1) as pool:
            posting = pool.submit(agent.client.send_post, "killed", profile_identify=account.did)
            held.wait()  # the PDS has made the post; its answer is in the relay
            killed.kill()
            # The SDK passes httpx's "disconnected without a response" on as it is.
            with pytest.raises(httpx.RemoteProtocolError):
                posting.result(timeout=READ_TIMEOUT_S)
    applied = records(pds.url, account.did)
    assert len(applied) == 1

    restarted = ServedProxy(tmp_path, "--config", str(config))
    with running(restarted):
        rerun = agents.start(account, batch.tool_call(), via=restarted)
        again = post_once_settled(rerun, account, "killed")

    assert rerun.answer(CREATE_RECORD).outcome == "reconciled"
    assert (again.uri, again.cid) == (applied[0]["uri"], applied[0]["cid"])
    assert [r["uri"] for r in records(pds.url, account.did)] == [again.uri]
    assert relay.reached_pds(CREATE_RECORD) == 1
