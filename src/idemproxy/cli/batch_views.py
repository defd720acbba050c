"""A readable page of a batch's progress (``--json`` prints the document itself): a section
per state, a row per effect, each told from the other effects of its tool call."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from idemproxy.cli.views import NOTE_CHARS, fit, shown, table, when
from idemproxy.ledger.documents import Document

DIGEST_CHARS = 8  # of a request digest: enough to tell a tool call's effects apart


def step(effect_key: str, *, whole: bool = False) -> str:
    """What tells one effect of a tool call from its others: the step the agent named
    (``s-NAME``), the route of a one-effect tool call (``r-ROUTE``) or the request's digest
    (``d-`` and its first hex digits, unless ``whole``); an explicit key (``ik:...``) as it is.
    """
    _, _, effect_id = effect_key.partition("/")
    if not effect_id.startswith("tc:"):
        return effect_id
    last = effect_id.rpartition(":")[2]  # the parts before it are quoted: they hold no ':'
    return last[: 2 + DIGEST_CHARS] if last.startswith("d-") and not whole else last


def steps(actions: Sequence[Document]) -> list[str]:
    """:func:`step` of each action, digests shown in full where the short ones would look
    alike within one tool call."""
    pairs = [(action["tool_call"], step(action["effect_key"])) for action in actions]
    seen = Counter(pairs)
    return [
        step(action["effect_key"], whole=True) if seen[pair] > 1 else pair[1]
        for action, pair in zip(actions, pairs, strict=True)
    ]


_SECTION_COLUMNS = {
    "completed": ["tool call", "step", "action", "status", "attempts", "external id"],
    "failed": ["tool call", "step", "action", "state", "status", "retryable", "attempts"],
    "pending": ["tool call", "step", "action", "attempts", "lease until"],
    "unknown": ["tool call", "step", "action", "attempts"],
}
_SECTION_NOTES = {"completed": (), "failed": ("key", "reason"), "pending": ("key",),
                  "unknown": ("key", "reason")}  # fmt: skip


def _section(title: str, actions: list[Document]) -> str:
    """One state's effects: a row each, told apart by step, with what the next command needs
    (the effect key of one to retry or resolve) under it."""
    rows = []
    for action, shown_step in zip(actions, steps(actions), strict=True):
        values = {
            **action,
            "tool call": action["tool_call"],
            "step": shown_step,
            # An expired record's outcome, from the archive: nothing is left to replay.
            "status": f"{shown(action['status'])} archived".strip()
            if action.get("archived")
            else shown(action["status"]),
            "external id": action["external_id"],
            "lease until": when(action["lease_expires_ms"]),
        }
        rows.append([values[column] for column in _SECTION_COLUMNS[title]])
    wanted = _SECTION_NOTES[title]
    notes = [
        [
            (label, text)
            for label, text in (
                ("key", action["effect_key"]),
                ("reason", fit(action["reason"], NOTE_CHARS)),
            )
            if label in wanted
        ]
        for action in actions
    ]
    return f"{title} ({len(actions)})\n" + table(_SECTION_COLUMNS[title], rows, notes)


def batch(document: Document) -> str:
    parts = [
        f"batch {document['batch']} of agent {document['agent']}",
        f"strategy: {document['strategy']}",
    ]
    if document["replay"]:
        parts.append("a re-run replays tool calls: " + ", ".join(document["replay"]))
    archived = sum(1 for title in _SECTION_COLUMNS for a in document[title] if a.get("archived"))
    if archived:
        parts.append(
            f"{archived} effect(s) whose records expired are shown from the batch's archive"
            " (status marked archived)"
        )
    if document.get("expired"):
        parts.append(
            "a re-run sends again tool calls (their records expired): "
            + ", ".join(document["expired"])
        )
    if document["resume_from"]:
        parts.append(f"a re-run sends anew from tool call {document['resume_from']}")
    if document["compensated"]:
        undone = ", ".join(action["tool_call"] for action in document["compensated"])
        parts.append(f"compensated, refused on a re-run (409 effect-compensated): {undone}")
    if document["abandoned"]:
        gone = document["abandoned"]
        parts.append(
            f"abandoned by {gone['actor']} at {when(gone['abandoned_ms'])}: {gone['note']}"
        )
    sections = [_section(title, document[title]) for title in _SECTION_COLUMNS]
    return "\n".join(parts) + "\n\n" + "\n\n".join(sections)
