"""The operator's tables, printed by the console script over a store a proxy filled: they fit a
terminal and say which request each effect was."""

from __future__ import annotations

from collections.abc import Mapping

from idemproxy.cli.views import status
from tests.cli.filled import (
    ACTOR,
    AGENT,
    BATCH,
    FAILED_KEY,
    NOTE,
    PATH,
    UNKNOWN_KEY,
    shown,
)
from tests.support.cli import WIDTH, idemproxy, widest


def test_the_audit_log_fits_a_terminal_and_keeps_keys_and_actors_whole(store_url: str) -> None:
    acting = ("--actor", ACTOR, "--note", NOTE, "--store", store_url)
    shown(idemproxy("review", "resolve", UNKNOWN_KEY, "--as", "applied", *acting))
    shown(idemproxy("review", "retry", FAILED_KEY, *acting))
    shown(idemproxy("recover", AGENT, BATCH, "--strategy", "abandon", *acting))

    page = shown(idemproxy("audit", AGENT, "--store", store_url))

    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    assert lines[0].split() == ["WHEN", "ACTION", "ACTOR"]
    rows = [line.split(None, 3)[2:] for line in lines if line[:1].isdigit()]
    assert rows == [
        ["review.resolve", ACTOR],
        ["review.retry", ACTOR],
        ["recover.abandon", ACTOR],
    ]
    assert f"    target  {UNKNOWN_KEY}" in lines
    assert f"    target  {BATCH}" in lines
    assert "    before  unknown" in lines
    assert "    after   completed" in lines
    assert sum(line.startswith(f"    note    {NOTE[:60]}") for line in lines) == 3


def test_the_review_queue_says_which_request_each_unknown_outcome_was(store_url: str) -> None:
    page = shown(idemproxy("review", "list", "--store", store_url))

    assert widest(page) <= WIDTH, page
    header, row, *notes = page.splitlines()
    assert header.split() == ["SINCE", "UPSTREAM", "METHOD", "PATH", "ACTION"]
    assert row.split()[2:] == ["discord", "POST", PATH, "post_message"]
    assert notes == [
        f"    key     {UNKNOWN_KEY}",
        f"    batch   {BATCH}, tool call call-3",
        "    reason  lease expired: the proxy holding this request stopped",
    ]


def status_document(retention: Mapping[str, int | None]) -> dict[str, object]:
    return {
        "store": "sqlite",
        "unknown": 0,
        "paused": 0,
        "parked": 0,
        "backlog": 0,
        "controller": "none",
        "event_retention_s": retention["events_s"],
        "retention": retention,
        "agents": [],
    }


def test_status_names_the_retention_only_where_it_is_not_the_default() -> None:
    default = {"events_s": 7 * 86_400, "audit_s": 90 * 86_400, "archive_s": 90 * 86_400}
    assert "retention" not in status(status_document(default))
    configured = {"events_s": 7200, "audit_s": 30 * 86_400, "archive_s": 90_061}
    assert (
        "retention: events 2 hours, audit 30 days, archive 90061 s"
        in status(status_document(configured)).splitlines()
    )
    memory = {"events_s": None, "audit_s": None, "archive_s": 3 * 86_400}
    assert "retention: archive 3 days" in status(status_document(memory)).splitlines()


def test_agent_status_shows_the_agent_in_error_with_its_batch_and_what_recovers(
    store_url: str,
) -> None:
    page = shown(idemproxy("agent", "status", AGENT, "--store", store_url))

    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    [error] = [line for line in lines if line.startswith("error: ")]
    assert error.startswith("error: unknown_outcome since ")
    assert "  why: lease expired: the proxy holding this request stopped" in lines
    assert f"  batch: {BATCH} (strategy manual_only)" in lines
    assert f"  effect: {UNKNOWN_KEY}" in lines
    hint = " ".join(page.partition("  recover: ")[2].split())
    assert f"`idemproxy review resolve {UNKNOWN_KEY} --as applied|not-applied`" in hint
    assert f"`idemproxy recover {AGENT} {BATCH}`" in hint


def test_status_shows_which_agents_are_in_error(store_url: str) -> None:
    ran = idemproxy("status", "--store", store_url)
    page = ran.stdout

    assert "1 agent(s) in error" in page.splitlines()[0]
    [row] = [line for line in page.splitlines() if line.startswith(AGENT)]
    assert f"unknown_outcome {BATCH} for " in row
