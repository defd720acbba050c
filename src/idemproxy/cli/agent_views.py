"""Readable tables of an agent's pause and of a resume (``--json`` prints the documents)."""

from __future__ import annotations

import textwrap

from idemproxy.cli.views import WIDTH, lasting, table, when
from idemproxy.ledger.documents import Document

_WHAT_RESUME_DOES = {
    "freed": "freed: sent again on the re-run",
    "already_free": "nothing applied: sent again on the re-run",
    "moved_on": "moved on since: left as it is",
    "unknown": "outcome unknown: stays in review",
    "gone": "expired",
}
_WOULD = {"freed": "would be freed: sent again on the re-run"}


def _attempts(items: list[Document], wording: dict[str, str]) -> str:
    rows = [
        [item["effect_key"], item["fence"], item["state"], wording.get(item["result"], "")]
        for item in items
    ]
    return table(["effect key", "attempt", "state", "on resume"], rows)


def agent(document: Document) -> str:
    head = f"agent {document['agent']}: {document['state']}"
    if document["state"] == "paused":
        head += (
            f" ({document['paused_by']}) since {when(document['since_ms'])} by"
            f" {document['actor']}\nreason: {document['reason']}"
        )
    lines = [head, f"consecutive failures: {document['failures']}"]
    lines += _error(document.get("error"))
    if document["snapshot"]:
        wording = _WHAT_RESUME_DOES | _WOULD
        lines += [
            "",
            f"snapshot ({len(document['snapshot'])})",
            _attempts(document["snapshot"], wording),
        ]
    return "\n".join(lines)


def _error(error: Document | None) -> list[str]:
    """The agent's error, if it is in error: why, since when, the batch, what recovers."""
    if error is None:
        return ["error: none"]
    since = f"{when(error['since_ms'])} ({lasting(error['seconds'])})"
    lines = [f"error: {error['reason']} since {since}", *_wrapped("why", error["detail"])]
    if error["batch"]:
        lines.append(f"  batch: {error['batch']} (strategy {error['strategy']})")
    if error["effect_key"]:
        lines.append(f"  effect: {error['effect_key']}")
    return lines + _wrapped("recover", error["hint"])


def _wrapped(label: str, text: str) -> list[str]:
    """``text`` under its label, wrapped to the terminal at spaces (a key stays whole)."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=f"  {label}: ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def resumed(document: Document) -> str:
    freed = document["freed"]
    lines = [f"resumed agent {document['agent']}"]
    if freed:
        lines += ["", _attempts(freed, _WHAT_RESUME_DOES)]
    lines += ["", f"next: {document['next_step']}"]
    return "\n".join(lines)
