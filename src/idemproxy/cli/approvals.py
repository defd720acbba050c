"""``idemproxy approvals list|show|approve|deny``: effects held until an operator approves them
(docs/approvals.md)."""

from __future__ import annotations

import argparse

from idemproxy.cli import views
from idemproxy.cli.failures import ExitCode
from idemproxy.cli.verbs import Call, acting, verb
from idemproxy.ledger.approvals import Verdict
from idemproxy.ledger.documents import Document
from idemproxy.ledger.operator import Operator

HELP = "effects held until an operator approves them: list, show, approve, deny"


def register(approvals: argparse.ArgumentParser) -> None:
    approval_verbs = approvals.add_subparsers(dest="approvals_verb", required=True, metavar="VERB")
    listing = verb(
        approval_verbs,
        "list",
        "held effects awaiting a decision or a use, oldest first; exits 1 while any awaits one",
        lambda op, a: op.approvals(a.agent, a.limit),
        listed,
        awaiting_exit_rule,
    )
    listing.add_argument("--agent", help="only this agent")
    listing.add_argument("--limit", type=int, default=100)
    show = verb(
        approval_verbs,
        "show",
        "one held effect, with its request (no header, secrets redacted)",
        lambda op, a: op.approval(a.agent, a.approval_id),
        shown,
    )
    _identify(show)
    for name, verdict, text in (
        ("approve", Verdict.APPROVED, "send it: its next attempt is sent, once"),
        ("deny", Verdict.DENIED, "never send it: the agent's repeats are told the note"),
    ):
        decide = verb(
            approval_verbs,
            name,
            f"{text} (compare-and-set: only while it awaits a decision)",
            _deciding(verdict),
            shown,
        )
        _identify(decide)
        acting(decide)


def _deciding(verdict: Verdict) -> Call:
    async def call(operator: Operator, args: argparse.Namespace) -> Document:
        return await operator.decide(args.agent, args.approval_id, verdict, args.actor, args.note)

    return call


def _identify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent")
    parser.add_argument("approval_id", help="ap_..., as in the agent's 428 answer or the list")


def awaiting_exit_rule(document: Document) -> ExitCode:
    waiting = any(item["state"] == "awaiting_approval" for item in document["items"])
    return ExitCode.NOT_FINE if waiting else ExitCode.OK


def listed(document: Document) -> str:
    """What waits: the request, why it was held, and its id (for ``approvals approve``)."""
    items = document["items"]
    rows = [
        [
            views.when(i["requested_ms"]),
            i["agent"],
            i["state"],
            i["upstream"],
            i["method"],
            i["path"],
        ]
        for i in items
    ]
    notes = [
        [
            ("id", item["approval_id"]),
            ("held", views.fit(item["rule"], views.NOTE_CHARS)),
            ("batch", f"{item['batch']}, tool call {item['tool_call']}" if item["batch"] else ""),
        ]
        for item in items
    ]
    return views.table(["since", "agent", "state", "upstream", "method", "path"], rows, notes)


def shown(document: Document) -> str:
    fields = ["approval_id", "effect_key", "state", "batch", "tool_call", "upstream", "method",
              "path", "rule", "requests", "actor", "note"]  # fmt: skip
    rows = [[name, views.shown(document[name])] for name in fields]
    rows.append(["requested", views.when(document["requested_ms"])])
    if document["valid_until_ms"]:
        rows.append(["valid until", views.when(document["valid_until_ms"])])
    return f"{views.table(['field', 'value'], rows)}\n\n{document['summary']}"
