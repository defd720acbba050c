"""applyWrites with two creates that name no record key: the PDS picks the keys, so only keys
the proxy gives them let it tell, after a lost answer, whether the writes were applied."""

from __future__ import annotations

from typing import Any

import pytest
from atproto import models  # type: ignore[import-untyped]

from tests.pds.agent import Agent, Agents, Batch
from tests.pds.direct import APPLY_WRITES, POST, Account, records
from tests.support.pds import ReferencePds
from tests.support.pds_relay import FaultKind, PdsRelay

pytestmark = pytest.mark.e2e

TEXTS = ("first of two", "second of two")


def apply_two_posts(agent: Agent, account: Account) -> Any:
    """The SDK's applyWrites of two new posts, each stamped now as an agent builds them."""
    created_at = agent.client.get_current_time_iso()
    writes = [
        models.ComAtprotoRepoApplyWrites.Create(
            collection=POST, value=models.AppBskyFeedPost.Record(text=text, created_at=created_at)
        )
        for text in TEXTS
    ]
    data = models.ComAtprotoRepoApplyWrites.Data(repo=account.did, writes=writes)
    return agent.client.com.atproto.repo.apply_writes(data)


def posted(pds: ReferencePds, account: Account) -> list[tuple[str, str]]:
    return [(r["uri"], r["value"]["text"]) for r in records(pds.url, account.did)]


def test_apply_writes_whose_answer_timed_out_is_reconciled_without_duplicates(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    held = relay.arm(APPLY_WRITES, FaultKind.HOLD)
    agent = agents.start(account, batch.tool_call())
    timed_out = agent.attempt(lambda: apply_two_posts(agent, account), APPLY_WRITES)
    held.wait()
    assert (timed_out.status, timed_out.outcome) == (504, "upstream-timeout")
    applied = posted(pds, account)
    assert sorted(text for _, text in applied) == sorted(TEXTS)

    retried = agent.attempt(lambda: apply_two_posts(agent, account), APPLY_WRITES)

    assert (retried.status, retried.outcome) == (200, "reconciled")
    assert posted(pds, account) == applied
    results = retried.json()["results"]
    assert sorted(result["uri"] for result in results) == sorted(uri for uri, _ in applied)

    rerun = agents.start(account, batch.tool_call())
    repeated = rerun.attempt(lambda: apply_two_posts(rerun, account), APPLY_WRITES)
    assert (repeated.status, repeated.outcome) == (200, "replayed")
    assert posted(pds, account) == applied
    assert relay.reached_pds(APPLY_WRITES) == 1


def test_a_repeated_apply_writes_is_replayed_and_posts_its_two_records_once(
    pds: ReferencePds, relay: PdsRelay, agents: Agents, account: Account, batch: Batch
) -> None:
    first = agents.start(account, batch.tool_call())
    made = apply_two_posts(first, account)
    rerun = agents.start(account, batch.tool_call())
    again = apply_two_posts(rerun, account)

    assert rerun.answer(APPLY_WRITES).outcome == "replayed"
    assert [r.uri for r in again.results] == [r.uri for r in made.results]
    assert sorted(uri for uri, _ in posted(pds, account)) == sorted(r.uri for r in made.results)
    assert relay.reached_pds(APPLY_WRITES) == 1
