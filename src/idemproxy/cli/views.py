"""Readable tables of the operator's documents (``--json`` prints the documents themselves).

A table fits in :data:`WIDTH` columns with the ids real agents use: what does not fit in a
row (an effect key, a reason, a note) goes on indented lines under it. Ids and keys are never
cut, since they are what the next command takes; free text is, and ``--json`` has it whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from idemproxy.cli.failures import ExitCode
from idemproxy.ledger.documents import Document

WIDTH = 100
MAX_TEXT_CHARS = 60  # free text in a column (reasons, errors, notes)
_INDENT = "    "
_LABEL_CHARS = 7
NOTE_CHARS = WIDTH - len(_INDENT) - _LABEL_CHARS - 1  # free text on a line under a row


def when(ms: int) -> str:
    """A store time in ms as UTC, to the second; '-' for none."""
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value in ("", None) else str(value)


def fit(text: str, chars: int) -> str:
    """Free text cut to ``chars``; --json has it whole."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def short(text: str) -> str:
    """Free text cut to fit a table column."""
    return fit(text, MAX_TEXT_CHARS)


def shown(value: Any) -> Any:
    """A status or count of 0 means none, shown as '-' (a False stays 'no')."""
    return "" if value == 0 and not isinstance(value, bool) else value


Notes = Sequence[tuple[str, str]]


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    notes: Sequence[Notes] | None = None,
) -> str:
    """Left-aligned columns under upper-case headers; '(none)' for no rows. ``notes`` are
    (label, text) lines under each row, for what does not fit in a column; empty texts are
    left out."""
    if not rows:
        return "(none)"
    cells = [[header.upper() for header in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for number, row in enumerate(cells):
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append(line.rstrip())
        if notes and number:
            lines += [
                f"{_INDENT}{label.ljust(_LABEL_CHARS)} {text}"
                for label, text in notes[number - 1]
                if text
            ]
    return "\n".join(lines)


def _events(document: Document) -> tuple[str, list[str]]:
    """The line on the outbox, and the columns of each agent's row, by whether a controller is
    delivered the events (a proxy older than the field does not say: as a store alone)."""
    backlog, controller = document["backlog"], document.get("controller", "unknown")
    if controller == "none":
        kept = document.get("event_retention_s")
        days = f"{kept // 86_400} days" if kept else "while the proxy runs"
        line = (
            f"events: no recovery controller is configured; {backlog} event(s) are kept {days}"
            " for the events API"
        )
        return line, ["agent", "state", "error", "unknown", "events"]
    if controller == "configured":
        line = (
            f"events: {backlog} event(s) not yet accepted by the recovery controller,"
            f" {document['parked']} agent(s) with delivery parked"
        )
    else:
        line = (
            f"events: {backlog} event(s) not accepted by a recovery controller (the store cannot"
            " tell if one is set)"
        )
    return line, ["agent", "state", "error", "unknown", "backlog", "delivery", "last error"]


def status(document: Document) -> str:
    head = (
        f"store {document['store']}: {document['unknown']} unknown outcome(s) awaiting review,"
        f" {document['paused']} agent(s) paused"
    )
    if "in_error" in document:  # a proxy older than the agent's error does not say
        head += f", {document['in_error']} agent(s) in error"
    if document.get("awaiting_approval"):
        head += f", {document['awaiting_approval']} effect(s) awaiting approval"
    events, columns = _events(document)
    rows = [
        [
            a["agent"],
            "paused" if a["paused"] else "running",
            error_cell(a.get("error")),
            a["unknown"],
            a["backlog"],
            "parked" if a["parked"] else "ok",
            short(a["last_error"]),
        ][: len(columns)]
        for a in document["agents"]
    ]
    kept = _retention(document)
    return f"{head}\n{events}{kept}\n\n{table(columns, rows)}"


_DEFAULT_RETENTION = {"events_s": 7 * 86_400, "audit_s": 90 * 86_400, "archive_s": 90 * 86_400}


def _retention(document: Document) -> str:
    """A line on the store's retention where it is not the default ('' otherwise, and from a
    proxy older than the field)."""
    figures = document.get("retention") or {}
    shown_figures = {name: kept for name, kept in figures.items() if kept is not None}
    if all(_DEFAULT_RETENTION.get(name) == kept for name, kept in shown_figures.items()):
        return ""
    parts = [f"{name.removesuffix('_s')} {_duration(kept)}" for name, kept in shown_figures.items()]
    return "\nretention: " + ", ".join(parts)


def _duration(seconds: int) -> str:
    for unit, size in (("days", 86_400), ("hours", 3600)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit if count != 1 else unit.removesuffix('s')}"
    return f"{seconds} s"


def lasting(seconds: float) -> str:
    """A duration as a person reads it: 42s, 5m, 3h, 2d."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def error_cell(error: Document | None) -> str:
    """An agent's error in a status row: why, which batch, for how long ("-": none)."""
    if error is None:
        return "-"
    batch = f" {error['batch']}" if error["batch"] else ""
    return f"{error['reason']}{batch} for {lasting(error['seconds'])}"


def status_exit_rule(document: Document) -> ExitCode:
    """Not fine while anything waits for an operator: an unknown outcome, a held effect, a
    paused agent, a parked delivery."""
    waiting = document["unknown"] or document["paused"] or document["parked"]
    waiting = waiting or document.get("awaiting_approval", 0)
    return ExitCode.NOT_FINE if waiting else ExitCode.OK


def plan(document: Document) -> str:
    lines = [
        f"recovered batch {document['batch']} of agent {document['agent']} ({document['mode']})",
        f"strategy now: {document['strategy']}",
        f"replayed on re-run: {', '.join(document['replay']) or '-'}",
        f"skipped on re-run: {', '.join(document['skip']) or '-'}",
        f"re-run sends anew from: {document['resume_from'] or 'after the tool calls skipped'}",
        f"freed records cleared: {', '.join(document['cleared']) or '-'}",
        f"still awaiting review: {', '.join(document['review']) or '-'}",
    ]
    if document["compensated"]:
        lines.append(f"compensated (refused on re-run): {', '.join(document['compensated'])}")
    if document["archived"]:
        lines.append("archived: yes")
    lines.append(f"next: {document['next_step']}")
    return "\n".join(lines)


def review(document: Document) -> str:
    """The review queue: what each request was, with its key (for ``review resolve``) and
    why its outcome is unknown under it."""
    items = document["items"]
    rows = [
        [when(i["updated_ms"]), i["upstream"], i["method"], i["path"], i["action"]] for i in items
    ]
    notes = [
        [
            ("key", item["effect_key"]),
            ("batch", f"{item['batch']}, tool call {item['tool_call']}" if item["batch"] else ""),
            ("reason", fit(item["reason"], NOTE_CHARS)),
        ]
        for item in items
    ]
    return table(["since", "upstream", "method", "path", "action"], rows, notes)


def record(document: Document) -> str:
    fields = ["effect_key", "state", "batch", "tool_call", "action", "upstream", "method", "path",
              "status", "external_id", "reason", "attempts"]  # fmt: skip
    rows = [[name, shown(document[name])] for name in fields]
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


def log(entries: list[Document]) -> str:
    """Entries of an audit log, newest last: when, what and who in a row, the rest under it.
    Who is cut to the room the row leaves (--json has it whole)."""
    if not entries:
        return "(none)"
    action_chars = max(len("action"), *(len(e["action"]) for e in entries))
    actor_chars = WIDTH - len("2026-01-01 00:00:00Z") - action_chars - 4
    rows = [[when(e["ts_ms"]), e["action"], fit(e["actor"], actor_chars)] for e in entries]
    notes = [
        [
            ("target", entry.get("target", "")),
            ("before", fit(entry["before"], NOTE_CHARS)),
            ("after", fit(entry["after"], NOTE_CHARS)),
            ("note", fit(entry["note"], NOTE_CHARS)),
        ]
        for entry in entries
    ]
    return table(["when", "action", "actor"], rows, notes)


def audit(document: Document) -> str:
    return log(document["entries"])
