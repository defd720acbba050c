"""``idemproxy duplicates``: which agent and batch keep repeating effects, and on which routes.

A client of the admin API's ``GET /v1/duplicates``. The repeats are counted by the running
proxy (idemproxy/duplicates.py) and kept nowhere in the store, so ``--store`` cannot answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from idemproxy.admin.client import AdminClient
from idemproxy.cli.views import short, table, when
from idemproxy.errors import ConfigError
from idemproxy.ledger.documents import Document
from idemproxy.ledger.operator import Operator

HELP = "repeats the proxy blocked, by agent and batch, with the routes they hit most"


NOT_IN_THE_STORE = (
    "blocked duplicates are counted by the running proxy, not kept in the store: ask its admin"
    " API with --admin-url (default $IDEMPROXY_ADMIN_URL) instead of --store"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The verb's own arguments, on the parser the operator verbs share (cli/operator.py)."""
    parser.add_argument("--agent", help="only this agent")
    parser.add_argument("--limit", type=int, default=10, help="batches shown per agent")
    run: Callable[[argparse.Namespace], int] = parser.get_default("run")

    def run_on_the_proxy(args: argparse.Namespace) -> int:
        if args.store:  # refused before it is opened: a store named by mistake stays as it is
            raise ConfigError(NOT_IN_THE_STORE)
        return run(args)

    parser.set_defaults(run=run_on_the_proxy)


async def fetch(operator: Operator, args: argparse.Namespace) -> Document:
    if not isinstance(operator, AdminClient):
        raise ConfigError(NOT_IN_THE_STORE)
    return await operator.duplicates(args.agent, args.limit)


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in kinds.items())


def _top_route(routes: list[Document]) -> str:
    if not routes:
        return ""
    top = routes[0]
    return f"{top['upstream']}/{top['route']} ({top['blocked']})"


def view(document: Document) -> str:
    head = (
        f"{document['blocked']} repeat(s) blocked by this proxy since {when(document['since_ms'])}"
    )
    if document["batches_forgotten"]:
        head += (
            f"\nand {document['repeats_forgotten']} more in {document['batches_forgotten']}"
            f" batch(es) left out: it keeps the {document['batches_kept']} that repeated last"
        )
    agents = document["agents"]
    agent_rows = [
        [a["agent"], a["blocked"], short(_kinds(a["kinds"])), _top_route(a["top_routes"])]
        for a in agents
    ]
    batch_rows = [
        [
            a["agent"],
            b["batch"],
            b["blocked"],
            short(_kinds(b["kinds"])),
            _top_route(b["top_routes"]),
            when(b["last_blocked_ms"]),
        ]
        for a in agents
        for b in a["batches"]
    ]
    not_shown = sum(a["batches_not_shown"] for a in agents)
    parts = [
        head,
        table(["agent", "blocked", "kinds", "top route"], agent_rows),
        "batches with the most repeats\n"
        + table(["agent", "batch", "blocked", "kinds", "top route", "last blocked"], batch_rows),
    ]
    if not_shown:
        parts.append(f"{not_shown} more batch(es): raise --limit, or --json")
    return "\n\n".join(parts)
