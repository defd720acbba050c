"""A readable page of the store's status (``--json`` prints the document itself)."""

from __future__ import annotations

from idemproxy.cli.failures import ExitCode
from idemproxy.cli.views import log, when
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
    lines += ["", "log", log(document["log"])]
    return "\n".join(lines)


def status_exit_rule(document: Document) -> ExitCode:
    """Not fine unless the store is ready: it may lose records, or it lost some."""
    return ExitCode.OK if document["status"] == "ready" else ExitCode.NOT_FINE
