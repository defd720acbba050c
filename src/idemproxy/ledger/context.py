"""The agent's recovery context: what a batch already did, for the agent's prompt before it
resumes ("these messages were already sent; this payment is in doubt"), as data and as a short
text ready for a system message.

It is read by the agent itself, without the admin token (admin/agent_context.py), so it holds
nothing secret: no request or response bodies, no headers, paths as stored (a policy's secret
path parameters redacted), and no effect keys (they are the operator's handles).
"""

from __future__ import annotations

from dataclasses import dataclass

from idemproxy.ledger.progress import BatchAction, BatchProgress, RecoveryStrategy

MAX_TEXT_ITEMS = 20  # of one section in the text; the data lists every one

_STRATEGY_ADVICE = {
    RecoveryStrategy.RESTART_BATCH: "nothing external completed: run the batch again from the"
    " start",
    RecoveryStrategy.SELECTIVE: "run the batch again with the same batch and tool-call ids: the"
    " completed tool calls get their recorded results and are not sent again; only the rest are"
    " sent",
    RecoveryStrategy.MANUAL_ONLY: "an operator must first say whether the effects in doubt"
    " happened; until then they are refused, so do not retry them or try to do them another way",
    RecoveryStrategy.ABANDON: "an operator abandoned this batch: do not run it again",
}
_EXPIRED = "its record expired: repeating it sends it again"


@dataclass(frozen=True, slots=True)
class ContextAction:
    """One effect of the batch, as the agent may see it."""

    tool_call: str
    action: str
    upstream: str
    method: str
    path: str  # as stored: secret path parameters redacted
    status: int  # the upstream's answer, 0 when none is recorded
    external_id: str  # the upstream's id of what it made (a message, a charge), if known
    summary: str  # one line: what it did, or why it stands where it does
    retryable: bool  # a failure a repeat sends again (otherwise the repeat replays it)


@dataclass(frozen=True, slots=True)
class RecoveryContext:
    agent: str
    batch: str
    strategy: RecoveryStrategy
    advice: str  # what the strategy means for the agent
    completed: tuple[ContextAction, ...]
    unknown: tuple[ContextAction, ...]  # may or may not have happened
    failed: tuple[ContextAction, ...]
    pending: tuple[ContextAction, ...]  # being sent right now
    compensated: tuple[ContextAction, ...]  # undone by an operator: a repeat is refused
    text: str  # the whole of it for a system message


def _request(action: BatchAction) -> str:
    return f"{action.method} {action.upstream} {action.path}"


def _summary(action: BatchAction, section: str) -> str:
    made = f", external id {action.external_id}" if action.external_id else ""
    if section == "completed":
        expired = f"; {_EXPIRED}" if action.archived else ""
        return f"{_request(action)} answered {action.status}{made}{expired}"
    if section == "compensated":
        return (
            f"{_request(action)} answered {action.status}{made}; undone by an operator's"
            " compensation, so a repeat is refused"
        )
    if section == "failed":
        answer = f"answered {action.status}" if action.status else "was not applied"
        again = "may be retried" if action.retryable else "a repeat gets the same failure"
        return f"{_request(action)} {answer}{made}; {again}"
    if section == "unknown":
        return f"{_request(action)}: outcome unknown, it may have happened"
    return f"{_request(action)}: being sent now"


def _actions(actions: tuple[BatchAction, ...], section: str) -> tuple[ContextAction, ...]:
    return tuple(
        ContextAction(
            tool_call=action.tool_call,
            action=action.action,
            upstream=action.upstream,
            method=action.method,
            path=action.path,
            status=action.status,
            external_id=action.external_id,
            summary=_summary(action, section),
            retryable=action.retryable,
        )
        for action in actions
    )


_HEADINGS = {
    "completed": "Already done (do not do these again; the same tool call replays its result)",
    "unknown": "Outcome unknown (it may have happened: do not repeat it)",
    "failed": "Failed",
    "pending": "Being sent right now (wait for it)",
    "compensated": "Undone by an operator (do not do these again unless told to)",
}


def _section(name: str, actions: tuple[ContextAction, ...]) -> list[str]:
    if not actions:
        return []
    lines = [f"{_HEADINGS[name]}: {len(actions)}"]
    lines += [
        f"- tool call {a.tool_call} ({a.action}): {a.summary}" for a in actions[:MAX_TEXT_ITEMS]
    ]
    if len(actions) > MAX_TEXT_ITEMS:
        lines.append(f"- and {len(actions) - MAX_TEXT_ITEMS} more")
    return lines


def recovery_context(progress: BatchProgress) -> RecoveryContext:
    """The batch's progress as the agent may see it, with its text."""
    sections = {
        "completed": _actions(progress.completed, "completed"),
        "unknown": _actions(progress.unknown, "unknown"),
        "failed": _actions(progress.failed, "failed"),
        "pending": _actions(progress.pending, "pending"),
        "compensated": _actions(progress.compensated, "compensated"),
    }
    advice = _STRATEGY_ADVICE[progress.strategy]
    lines = [
        f"Recovery context of batch {progress.batch}: it ran before and was interrupted."
        " What it already did:"
    ]
    for name, actions in sections.items():
        lines += _section(name, actions)
    if not any(sections.values()):
        lines.append("(no effect of it is recorded)")
    lines.append(f"Strategy {progress.strategy.value}: {advice}.")
    return RecoveryContext(
        agent=progress.agent,
        batch=progress.batch,
        strategy=progress.strategy,
        advice=advice,
        completed=sections["completed"],
        unknown=sections["unknown"],
        failed=sections["failed"],
        pending=sections["pending"],
        compensated=sections["compensated"],
        text="\n".join(lines),
    )
