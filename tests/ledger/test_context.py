"""The agent's recovery context: what a batch did, as data and as a system message's text,
with nothing secret in it."""

from __future__ import annotations

import dataclasses

from idemproxy.ledger.audit import ActionLimit
from idemproxy.ledger.context import MAX_TEXT_ITEMS, recovery_context
from idemproxy.ledger.progress import BatchAction, BatchProgress, RecoveryStrategy, batch_progress
from idemproxy.ledger.recovery import Recovery
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState
from tests.ledger.conftest import make_effect


async def progress_of(store: Store, agent: str, batch: str) -> BatchProgress:
    return await Recovery(store, ActionLimit(store, 60)).progress(agent, batch)


async def test_the_context_tells_what_happened_what_is_in_doubt_and_what_failed(
    store: Store, ns: str
) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    await make_effect(store, ns, "b1", "c2", RecordState.COMPLETED, status=401)
    await make_effect(store, ns, "b1", "c3", RecordState.NOT_APPLIED)
    await make_effect(store, ns, "b1", "c4", RecordState.UNKNOWN)
    context = recovery_context(await progress_of(store, ns, "b1"))

    assert context.strategy is RecoveryStrategy.MANUAL_ONLY
    [done] = context.completed
    assert (done.tool_call, done.action, done.external_id) == ("c1", "post_message", "m-1")
    assert done.summary == "POST discord /channels/1/messages answered 200, external id m-1"
    assert {f.tool_call: f.retryable for f in context.failed} == {"c2": False, "c3": True}
    assert [f.summary for f in context.failed] == [
        "POST discord /channels/1/messages answered 401; a repeat gets the same failure",
        "POST discord /channels/1/messages was not applied; may be retried",
    ]
    assert [u.tool_call for u in context.unknown] == ["c4"]
    lines = context.text.splitlines()
    assert lines[0].startswith("Recovery context of batch b1: it ran before")
    assert lines[1].startswith("Already done (do not do these again")
    assert lines[1].endswith(": 1")
    assert (
        "- tool call c4 (post_message): POST discord /channels/1/messages: outcome unknown,"
        " it may have happened" in lines
    )
    assert lines[-1].startswith("Strategy manual_only: an operator must first say")
    # Effect keys are the operator's handles; the agent gets tool calls.
    assert ns + "/" not in context.text


def test_an_empty_batch_says_so() -> None:
    empty = recovery_context(batch_progress("a", "b", [], None))
    assert "(no effect of it is recorded)" in empty.text
    assert empty.strategy is RecoveryStrategy.RESTART_BATCH
    assert empty.text.endswith("run the batch again from the start.")


async def test_a_long_section_is_cut_in_the_text_but_whole_in_the_data(
    store: Store, ns: str
) -> None:
    for i in range(MAX_TEXT_ITEMS + 3):
        await make_effect(store, ns, "long", f"c{i}", RecordState.COMPLETED)
    context = recovery_context(await progress_of(store, ns, "long"))
    assert len(context.completed) == MAX_TEXT_ITEMS + 3
    assert sum(1 for line in context.text.splitlines() if line.startswith("- tool call")) == 20
    assert "- and 3 more" in context.text


def _action(tool_call: str, **fields: object) -> BatchAction:
    found: dict[str, object] = {
        "effect_key": f"a/{tool_call}",
        "tool_call": tool_call,
        "action": "post_message",
        "upstream": "discord",
        "method": "POST",
        "path": "/channels/1/messages",
        "state": RecordState.COMPLETED,
        "status": 200,
    }
    return BatchAction(**(found | fields))  # type: ignore[arg-type]


def test_an_effect_undone_by_its_compensation_is_told_as_undone_not_left_out() -> None:
    undone = _action("c1", external_id="m-1", compensated_by="a/compensate:c1")
    progress = dataclasses.replace(batch_progress("a", "b", [], None), compensated=(undone,))
    context = recovery_context(progress)

    [told] = context.compensated
    assert told.tool_call == "c1"
    assert "undone" in told.summary
    assert "refused" in told.summary
    assert "- tool call c1 (post_message): " + told.summary in context.text.splitlines()


def test_a_completed_effect_whose_record_expired_is_not_said_to_replay() -> None:
    kept = _action("c1", external_id="m-1")
    expired = _action("c2", external_id="m-2", archived=True)
    progress = dataclasses.replace(
        batch_progress("a", "b", [], None), completed=(kept, expired), expired=("c2",)
    )
    context = recovery_context(progress)

    summaries = {action.tool_call: action.summary for action in context.completed}
    assert "expired" not in summaries["c1"]
    assert "its record expired: repeating it sends it again" in summaries["c2"]
