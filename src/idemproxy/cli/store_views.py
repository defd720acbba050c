"""A readable page of the store's status (``--json`` prints the document itself)."""

from __future__ import annotations

from idemproxy.cli.views import short, table, when
from idemproxy.ledger.documents import Document


def status(document: Document) -> str:
    lines = [f"store {document['store']}: {document['status']}"]
    if document["reason"]:
        lines.append(f"why: {document['reason']}")
    lines += [f"warning: {warning}" for warning in document["warnings"]]
    durability = document["durability"]
    if durability is not None:
        lines.append(f"eviction policy: {durability['eviction_policy'] or 'cannot be read'}")
        lines.append(f"persistence: {durability['persistence']}")
    marker = document["marker"]
    if marker is not None:
        lines.append(
            f"marker: {marker['epoch']}, made {when(marker['created_ms'])},"
            f" {marker['checks']} checks"
        )
    rows = [
        [
            when(e["ts_ms"]),
            e["actor"],
            e["action"],
            short(e["before"]),
            e["after"],
            short(e["note"]),
        ]
        for e in document["log"]
    ]
    lines += ["", "log", table(["when", "actor", "action", "before", "after", "note"], rows)]
    return "\n".join(lines)
