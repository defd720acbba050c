"""Readable tables of the operator's documents (``--json`` prints the documents themselves)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from idemproxy.ledger.documents import Document

MAX_TEXT_CHARS = 60  # free text (reasons, errors, notes); ids and keys are never cut


def when(ms: int) -> str:
    """A store time in ms as UTC, to the second; '-' for none."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value in ("", None) else str(value)


def short(text: str) -> str:
    """Free text cut to fit a table; --json has it whole."""
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _shown(value: Any) -> Any:
    """A status or count of 0 means none, shown as '-' (a False stays 'no')."""
    return "" if value == 0 and not isinstance(value, bool) else value


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns under upper-case headers; '(none)' for no rows."""
    if not rows:
        return "(none)"
    cells = [[header.upper() for header in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines)


def status(document: Document) -> str:
    head = (
        f"store {document['store']}: {document['unknown']} unknown outcome(s) awaiting review,"
        f" {document['backlog']} event(s) not yet delivered, {document['parked']} agent(s)"
        f" with delivery parked, {document['paused']} agent(s) paused"
    )
    rows = [
        [
            a["agent"],
            "paused" if a["paused"] else "running",
            a["unknown"],
            a["backlog"],
            "parked" if a["parked"] else "ok",
            short(a["last_error"]),
        ]
        for a in document["agents"]
    ]
    columns = ["agent", "state", "unknown", "backlog", "delivery", "last error"]
    return head + "\n\n" + table(columns, rows)


def _actions(title: str, actions: list[Document], columns: Sequence[str]) -> str:
    rows = [
        [short(action[c]) if c == "reason" else _shown(action[c]) for c in columns]
        for action in actions
    ]
    return f"{title} ({len(actions)})\n" + table(columns, rows)


def batch(document: Document) -> str:
    parts = [
        f"batch {document['batch']} of agent {document['agent']}",
        f"strategy: {document['strategy']}",
    ]
    if document["replay"]:
        parts.append("a re-run replays tool calls: " + ", ".join(document["replay"]))
    if document["abandoned"]:
        gone = document["abandoned"]
        parts.append(
            f"abandoned by {gone['actor']} at {when(gone['abandoned_ms'])}: {gone['note']}"
        )
    sections = [
        _actions(
            "completed", document["completed"], ["tool_call", "action", "status", "external_id"]
        ),
        _actions(
            "failed", document["failed"], ["tool_call", "action", "status", "retryable", "reason"]
        ),
        _actions("pending", document["pending"], ["tool_call", "action", "attempts", "effect_key"]),
        _actions("unknown", document["unknown"], ["tool_call", "action", "effect_key", "reason"]),
    ]
    return "\n".join(parts) + "\n\n" + "\n\n".join(sections)


def plan(document: Document) -> str:
    lines = [
        f"recovered batch {document['batch']} of agent {document['agent']} ({document['mode']})",
        f"strategy now: {document['strategy']}",
        f"replayed on re-run: {', '.join(document['replay']) or '-'}",
        f"freed records cleared: {', '.join(document['cleared']) or '-'}",
        f"still awaiting review: {', '.join(document['review']) or '-'}",
    ]
    if document["archived"]:
        lines.append("archived: yes")
    lines.append(f"next: {document['next_step']}")
    return "\n".join(lines)


def review(document: Document) -> str:
    rows = [
        [
            item["effect_key"],
            item["batch"],
            item["tool_call"],
            item["action"],
            when(item["updated_ms"]),
            short(item["reason"]),
        ]
        for item in document["items"]
    ]
    return table(["effect key", "batch", "tool call", "action", "since", "reason"], rows)


def record(document: Document) -> str:
    fields = ["effect_key", "state", "batch", "tool_call", "action", "upstream", "method", "path",
              "status", "external_id", "reason", "attempts"]  # fmt: skip
    rows = [[name, _shown(document[name])] for name in fields]
    rows.append(["updated", when(document["updated_ms"])])
    return table(["field", "value"], rows)


def deliveries(document: Document) -> str:
    rows = [
        [
            d["agent"],
            d["backlog"],
            "parked" if d["parked"] else "ok",
            d["attempts"],
            d["acked"],
            short(d["last_error"]),
        ]
        for d in document["agents"]
    ]
    return table(["agent", "backlog", "delivery", "attempts", "last delivered", "last error"], rows)


def audit(document: Document) -> str:
    rows = [
        [
            when(e["ts_ms"]),
            e["actor"],
            e["action"],
            e["target"],
            *map(short, (e["before"], e["after"], e["note"])),
        ]
        for e in document["entries"]
    ]
    return table(["when", "actor", "action", "target", "before", "after", "note"], rows)
