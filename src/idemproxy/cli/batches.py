"""``idemproxy batches AGENT``: an agent's batches, newest first, with their state; and the
batch ``idemproxy recover AGENT`` picks when no batch is named (the newest in error)."""

from __future__ import annotations

import argparse
import sys

from idemproxy.cli.views import NOTE_CHARS, fit, shown, table, when
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.documents import Document
from idemproxy.ledger.operator import MAX_LIMIT, Operator

HELP = "an agent's batches, newest first: strategy, effects by state, and which are in error"
_COLUMNS = ["batch", "strategy", "done", "failed", "pending", "unknown"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The verb's own arguments, on the parser the operator verbs share (cli/operator.py)."""
    parser.add_argument("agent")
    parser.add_argument("--limit", type=int, default=20, help="the newest this many batches")


async def fetch(operator: Operator, args: argparse.Namespace) -> Document:
    return await operator.batches(args.agent, args.limit)


def view(document: Document) -> str:
    agent, listed = document["agent"], document["batches"]
    rows, notes = [], []
    for item in listed:
        counts = [shown(item[name]) for name in ("completed", "failed", "pending", "unknown")]
        rows.append([item["batch"], item["strategy"], *counts])
        why = "abandoned" if item["abandoned"] else fit(item["error"], NOTE_CHARS)
        notes.append([("updated", when(item["updated_ms"])), ("error", why)])
    lines = [f"batches of agent {agent}, newest first ({len(listed)})"]
    lines.append(table(_COLUMNS, rows, notes))
    in_error = sum(1 for item in listed if item["in_error"])
    if in_error:
        lines += ["", f"{in_error} in error; `idemproxy recover {agent}` recovers the newest of"
                  " them"]  # fmt: skip
    return "\n".join(lines)


async def chosen(operator: Operator, agent: str) -> str:
    """The batch to recover when none is named: the agent's newest batch in error. Says on
    stderr which it chose and why; refused when none is in error."""
    listed = (await operator.batches(agent, MAX_LIMIT))["batches"]
    in_error = [item for item in listed if item["in_error"]]
    if not in_error:
        raise RequestRefused(
            ProblemCode.NOT_FOUND,
            f"agent {agent!r} has no batch in error (none of its {len(listed)} batch(es) has an"
            f" unknown outcome, a failure or a lapsed attempt): list them with `idemproxy"
            f" batches {agent}` and name the one to recover: `idemproxy recover {agent} BATCH`",
        )
    first = in_error[0]
    why = f"recovering batch {first['batch']}: the newest of agent {agent}'s batches in error"
    why += f" ({first['error']})"
    if len(in_error) > 1:
        others = ", ".join(item["batch"] for item in in_error[1:])
        why += f"; older ones in error too: {others} (name one to recover it instead)"
    print(why, file=sys.stderr)
    return str(first["batch"])
