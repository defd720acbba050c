"""A batch's status, printed by the console script over a store a proxy filled: it fits a
terminal and tells apart the effects of one tool call."""

from __future__ import annotations

from idemproxy.cli.batch_views import batch, steps
from idemproxy.ledger import documents
from idemproxy.ledger.progress import batch_progress
from idemproxy.store.outcomes import ArchivedOutcome
from idemproxy.store.records import RecordState
from tests.cli.filled import (
    AGENT,
    BATCH,
    DIGESTS,
    FAILED_KEY,
    UNKNOWN_KEY,
    shown,
)
from tests.support.cli import WIDTH, idemproxy, widest


def test_batch_status_tells_apart_the_effects_of_one_tool_call(store_url: str) -> None:
    page = shown(idemproxy("batch-status", AGENT, BATCH, "--store", store_url))

    assert widest(page) <= WIDTH, page
    lines = page.splitlines()
    completed = lines.index("completed (2)")
    assert lines[completed + 1].split() == [
        "TOOL", "CALL", "STEP", "ACTION", "STATUS", "ATTEMPTS", "EXTERNAL", "ID",
    ]  # fmt: skip
    rows = sorted(line.split() for line in lines[completed + 2 : completed + 4])
    assert rows == sorted(
        ["call-1", f"d-{digest[:8]}", "post_message", "200", "1", "-"] for digest in DIGESTS
    )
    failed = lines.index("failed (1)")
    assert lines[failed + 2].split() == [
        "call-2", "s-thread", "post_message", "completed", "403", "no", "1",
    ]  # fmt: skip
    assert lines[failed + 3 : failed + 5] == [
        f"    key     {FAILED_KEY}",
        "    reason  upstream answered 403",
    ]
    unknown = lines.index("unknown (1)")
    assert lines[unknown + 2].split() == ["call-3", "d-f404f7fc", "post_message", "1"]
    assert lines[unknown + 3] == f"    key     {UNKNOWN_KEY}"


def test_digests_alike_in_their_first_digits_are_shown_whole() -> None:
    keys = [f"{AGENT}/tc:{BATCH}:call-1:d-9d828243{tail}" for tail in ("a" * 24, "b" * 24)]
    actions = [{"tool_call": "call-1", "effect_key": key} for key in keys]
    actions.append({"tool_call": "call-2", "effect_key": f"{AGENT}/ik:order-7-refund"})
    assert steps(actions) == [f"d-9d828243{'a' * 24}", f"d-9d828243{'b' * 24}", "ik:order-7-refund"]


def test_archived_outcomes_are_marked_and_their_tool_calls_said_to_be_sent_again() -> None:
    def outcome(effect_id: str, tool_call: str, status: int) -> ArchivedOutcome:
        return ArchivedOutcome(
            effect_id, "b1", tool_call, "post_message", "discord", "POST", "/m",
            RecordState.COMPLETED, status, "m-1", "", 1, 10, 20,
        )  # fmt: skip

    outcomes = [outcome("tc:b1:c1:r-post", "c1", 200), outcome("tc:b1:c2:r-post", "c2", 403)]
    page = batch(documents.value(batch_progress("agent-1", "b1", [], None, outcomes)))

    lines = page.splitlines()
    assert "2 effect(s) whose records expired are shown from the batch's archive" in page
    assert "a re-run sends again tool calls (their records expired): c1" in lines
    assert "a re-run replays" not in page
    completed = lines.index("completed (1)")
    assert lines[completed + 2].split() == [
        "c1", "r-post", "post_message", "200", "archived", "1", "m-1",
    ]  # fmt: skip
    failed = lines.index("failed (1)")
    assert lines[failed + 2].split()[3:6] == ["completed", "403", "archived"]
