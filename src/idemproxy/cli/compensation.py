"""``idemproxy recover AGENT BATCH --strategy compensate [--yes] [--header ...]``: the plan to
undo a batch's completed effects, and, confirmed, running it through the proxy; and
``idemproxy recover AGENT --rollback-to BATCH [--yes]``, the same for every later batch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from idemproxy.cli import batches, views
from idemproxy.errors import ConfigError
from idemproxy.ledger.documents import Document
from idemproxy.ledger.operator import Operator
from idemproxy.ledger.recovery import RecoverMode

COMPENSATE = "compensate"


def credentials(headers: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--header stripe=Authorization:Bearer sk_...`` as ``{"stripe": {"Authorization": ...}}``."""
    parsed: dict[str, dict[str, str]] = {}
    for text in headers:
        upstream, _, header = text.partition("=")
        name, colon, value = header.partition(":")
        if not (upstream and colon and name.strip() and value.strip()):
            raise ConfigError(
                f"--header {text!r} is not UPSTREAM=NAME:VALUE; write it like"
                ' --header "stripe=Authorization: Bearer $STRIPE_KEY"'
            )
        parsed.setdefault(upstream, {})[name.strip()] = value.strip()
    return parsed


async def recover(operator: Operator, args: argparse.Namespace) -> Document:
    """The ``recover`` verb: a recovery, or a compensation plan (run with ``--yes``)."""
    if args.rollback_to is not None:
        if args.batch not in (None, args.rollback_to) or args.strategy != "auto":
            raise ConfigError(
                "--rollback-to BATCH names the batch to roll back to: give no other batch and"
                " no --strategy with it"
            )
        sent = credentials(args.header) if args.yes else None
        return await operator.rollback(args.agent, args.rollback_to, args.actor, args.note, sent)
    if args.batch is None:
        args.batch = await batches.chosen(operator, args.agent)
    if args.strategy != COMPENSATE:
        mode = RecoverMode.parse(args.strategy)
        return await operator.recover(args.agent, args.batch, mode, args.actor, args.note)
    if not args.yes:
        return await operator.compensation(args.agent, args.batch)
    sent = credentials(args.header)
    return await operator.compensate(args.agent, args.batch, args.actor, args.note, sent)


def recovered(document: Document) -> str:
    if "target" in document:
        return rollback(document)
    return plan(document) if "confirmed" in document else views.plan(document)


def rollback(document: Document) -> str:
    verb = "rolled back" if document["confirmed"] else "plan to roll back"
    lines = [
        f"{verb} agent {document['agent']} to the end of batch {document['target']}:"
        " its later batches, newest first"
    ]
    for batch in document["batches"]:
        lines += ["", plan(batch)]
    lines += ["", f"undone: {', '.join(document['undone']) or '-'}"]
    lines += [f"next: {document['next_step']}"]
    return "\n".join(lines)


def _rows(items: list[Document]) -> list[list[object]]:
    return [
        [
            item["effect_key"],
            item["action"],
            item["state"],
            item["request"],
            item["status"] or "",
            views.short(item["detail"]),
        ]
        for item in items
    ]


def plan(document: Document) -> str:
    verb = "compensated" if document["confirmed"] else "plan to compensate"
    lines = [f"{verb} batch {document['batch']} of agent {document['agent']}, newest first"]
    columns = ["effect key", "action", "state", "compensation", "status", "detail"]
    lines += [
        "",
        f"to undo ({len(document['undo'])})",
        views.table(columns, _rows(document["undo"])),
    ]
    if document["cannot"]:
        cannot = document["cannot"]
        lines += ["", f"cannot be undone ({len(cannot)})", views.table(columns, _rows(cannot))]
    lines += ["", f"next: {document['next_step']}"]
    return "\n".join(lines)
