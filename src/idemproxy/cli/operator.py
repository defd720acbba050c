"""Operator verbs (SPEC 7): ``status``, ``batch-status``, ``batches``, ``recover``, ``review
list|resolve|retry``, ``agent status|pause|resume``, ``delivery list|retry``, ``audit`` and
``store status|acknowledge-loss``.

Each works on a running proxy's admin API (``--admin-url``, default ``$IDEMPROXY_ADMIN_URL`` or
http://127.0.0.1:9090, token from ``--token`` or ``$IDEMPROXY_ADMIN_TOKEN``) or directly on a
store that a proxy made (``--store URL``; none is ever created here), prints a readable table,
or the JSON document with ``--json``. Exit codes: :mod:`idemproxy.cli.failures`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeAlias

import orjson

from idemproxy.admin.client import DEFAULT_ADMIN_URL, AdminClient, admin_url
from idemproxy.cli import (
    agent_views,
    batch_views,
    compensation,
    duplicates,
    on_store,
    store_views,
    views,
)
from idemproxy.cli import batches as batch_list
from idemproxy.cli.failures import EXIT_CODES_HELP, ExitCode
from idemproxy.errors import ConfigError
from idemproxy.ledger.documents import Document
from idemproxy.ledger.review import Decision
from idemproxy.ledger.service import Operator

ADMIN_URL_VARIABLE = "IDEMPROXY_ADMIN_URL"
TOKEN_VARIABLE = "IDEMPROXY_ADMIN_TOKEN"  # noqa: S105 - the name of a variable, not a token

Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Call = Callable[[Operator, argparse.Namespace], Awaitable[Document]]
View = Callable[[Document], str]
ExitRule = Callable[[Document], ExitCode]


def default_actor() -> str:
    """Who the audit log says acted: the login and host running the command."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid-{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def fine(document: Document) -> ExitCode:
    """The exit rule of a verb whose answer is all it has to say."""
    return ExitCode.OK


def _admin_client(args: argparse.Namespace) -> AdminClient:
    """The admin API the flags or the environment name, with the token they give."""
    if args.admin_url is not None:
        text, source = args.admin_url, "--admin-url"
    else:
        text, source = os.environ.get(ADMIN_URL_VARIABLE) or DEFAULT_ADMIN_URL, ADMIN_URL_VARIABLE
    try:
        url = admin_url(text)
    except ValueError as exc:
        raise ConfigError(f"{source} {exc}") from exc
    if args.token is not None:
        return AdminClient(url, args.token, "given with --token")
    return AdminClient(url, os.environ.get(TOKEN_VARIABLE) or None, f"in {TOKEN_VARIABLE}")


@contextlib.asynccontextmanager
async def _operator(args: argparse.Namespace) -> AsyncIterator[Operator]:
    if args.store:
        if args.token is not None:
            raise ConfigError(
                "--token is for the admin API (--admin-url); --store works on the store"
                " directly and takes no token"
            )
        async with on_store.ledger(args) as ledger:
            yield ledger
        return
    on_store.refuse_config_without_store(args)
    client = _admin_client(args)
    try:
        yield client
    finally:
        await client.close()


async def _call(args: argparse.Namespace, call: Call, view: View) -> tuple[Document, str]:
    async with _operator(args) as operator:
        document = await call(operator, args)
        try:
            # Shown even for --json, to tell a document of the admin API from any other JSON.
            shown = view(document)
        except (KeyError, TypeError) as exc:
            if isinstance(operator, AdminClient):
                raise operator.not_a_document(str(exc)) from exc
            raise
        return document, shown


def _runner(call: Call, view: View, exit_rule: ExitRule) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        document, shown = asyncio.run(_call(args, call, view))
        print(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() if args.json else shown)
        return int(exit_rule(document))

    return run


def _verb(
    verbs: Verbs,
    name: str,
    help_text: str,
    call: Call,
    view: View,
    exit_rule: ExitRule = fine,
) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES_HELP)
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--admin-url",
        help=f"a running proxy's admin listener (default ${ADMIN_URL_VARIABLE} or"
        f" {DEFAULT_ADMIN_URL})",
    )
    source.add_argument(
        "--store", help="work on this store instead (one a proxy made): redis://..., sqlite:///..."
    )
    parser.add_argument(
        "--token",
        help=f"the admin API's token (default ${TOKEN_VARIABLE}, which keeps it out of the"
        " process list)",
    )
    on_store.add_config_flag(parser)
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.set_defaults(run=_runner(call, view, exit_rule))
    return parser


def _acting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--note", default="", help="why, for the audit log")
    parser.add_argument("--actor", default=default_actor(), help="who, for the audit log")


def register(verbs: Verbs) -> None:
    _verb(verbs, "status", "unknown outcomes, paused agents and events of every agent; exits 1"
          " when any wait for an operator", lambda op, a: op.status(), views.status,
          views.status_exit_rule)  # fmt: skip

    batch = _verb(verbs, "batch-status", "a batch's progress and recovery strategy",
                  lambda op, a: op.batch(a.agent, a.batch), batch_views.batch)  # fmt: skip
    batch.add_argument("agent")
    batch.add_argument("batch")

    batch_list.add_arguments(
        _verb(verbs, "batches", batch_list.HELP, batch_list.fetch, batch_list.view)
    )

    recover = _verb(
        verbs,
        "recover",
        "prepare a batch's re-run (auto, restart, restart-from-last-external), archive it"
        " (abandon), undo its completed effects (compensate), or every later batch's"
        " (--rollback-to)",
        compensation.recover,
        compensation.recovered,
    )
    recover.add_argument("agent")
    recover.add_argument("batch", nargs="?", help="default: the agent's newest batch in error")
    recover.add_argument(
        "--strategy",
        choices=["auto", "restart", "restart-from-last-external", "abandon", "compensate"],
        default="auto",
    )
    recover.add_argument(
        "--rollback-to",
        metavar="BATCH",
        help="undo every batch of the agent after BATCH, newest first (sent with --yes)",
    )
    recover.add_argument(
        "--yes",
        action="store_true",
        help="compensate, --rollback-to: send them (without: the plan)",
    )
    recover.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="UPSTREAM=NAME:VALUE",
        help="compensate: a header for UPSTREAM's compensations (its credentials); repeatable",
    )
    _acting(recover)

    _register_review(verbs.add_parser("review", help="the queue of unknown outcomes"))
    _register_agent(verbs.add_parser("agent", help="pause an agent, or resume it once fixed"))
    _register_delivery(
        verbs.add_parser("delivery", help="delivery of events to the recovery controller")
    )

    _register_store(
        verbs.add_parser("store", help="whether the store keeps records, and what it lost")
    )

    duplicates.add_arguments(
        _verb(verbs, "duplicates", duplicates.HELP, duplicates.fetch, duplicates.view)
    )

    audit = _verb(verbs, "audit", "an agent's audit log of operator actions",
                  lambda op, a: op.audit(a.agent, a.limit), views.audit)  # fmt: skip
    audit.add_argument("agent")
    audit.add_argument("--limit", type=int, default=100)


def _register_review(review: argparse.ArgumentParser) -> None:
    review_verbs = review.add_subparsers(dest="review_verb", required=True, metavar="VERB")
    listing = _verb(review_verbs, "list", "effects awaiting a decision, oldest first",
                    lambda op, a: op.review(a.agent, a.limit), views.review)  # fmt: skip
    listing.add_argument("--agent", help="only this agent")
    listing.add_argument("--limit", type=int, default=100)
    resolve = _verb(
        review_verbs,
        "resolve",
        "say whether an effect happened (compare-and-set: only while it is unknown)",
        lambda op, a: op.resolve(a.key, Decision.parse(a.decision), a.actor, a.note, a.external_id),
        views.record,
    )
    resolve.add_argument("key", help="the effect key, as in Idem-Key or the review list")
    resolve.add_argument(
        "--as", dest="decision", required=True, choices=["applied", "not-applied", "not_applied"]
    )
    resolve.add_argument("--external-id", default="", help="the upstream's id of the effect")
    _acting(resolve)
    retry = _verb(
        review_verbs,
        "retry",
        "free a failed effect so that its next request is sent again (compare-and-set)",
        lambda op, a: op.retry(a.key, a.actor, a.note),
        views.record,
    )
    retry.add_argument("key", help="the effect key, as in Idem-Key or batch-status")
    _acting(retry)


def _register_agent(agent: argparse.ArgumentParser) -> None:
    agent_verbs = agent.add_subparsers(dest="agent_verb", required=True, metavar="VERB")
    status = _verb(agent_verbs, "status", "the agent's pause, failures and snapshot",
                   lambda op, a: op.agent(a.agent), agent_views.agent)  # fmt: skip
    pause = _verb(agent_verbs, "pause", "hold every effect of the agent until it is resumed",
                  lambda op, a: op.pause(a.agent, a.actor, a.note), agent_views.agent)  # fmt: skip
    resume = _verb(
        agent_verbs,
        "resume",
        "mark the cause fixed: free the pause's failed effects, then let the agent act again",
        lambda op, a: op.resume(a.agent, a.actor, a.note),
        agent_views.resumed,
    )
    for parser in (status, pause, resume):
        parser.add_argument("agent")
    _acting(pause)
    _acting(resume)


def _register_delivery(delivery: argparse.ArgumentParser) -> None:
    delivery_verbs = delivery.add_subparsers(dest="delivery_verb", required=True, metavar="VERB")
    listing = _verb(delivery_verbs, "list", "backlog and parked deliveries per agent",
                    lambda op, a: op.deliveries(a.agent), views.deliveries)  # fmt: skip
    listing.add_argument("--agent", help="only this agent")
    retry = _verb(
        delivery_verbs,
        "retry",
        "send an agent's parked events again",
        lambda op, a: op.retry_delivery(a.agent, a.actor, a.note),
        views.deliveries,
    )
    retry.add_argument("agent")
    _acting(retry)


def _register_store(store: argparse.ArgumentParser) -> None:
    store_verbs = store.add_subparsers(dest="store_verb", required=True, metavar="VERB")
    _verb(store_verbs, "status", "whether the store can keep records, whether it lost some;"
          " exits 1 unless it is ready", lambda op, a: op.store_status(), store_views.status,
          store_views.status_exit_rule)  # fmt: skip
    acknowledge = _verb(
        store_verbs,
        "acknowledge-loss",
        "let effects go ahead again after the store lost records, once what the effects"
        " before the loss did has been checked at the upstreams",
        lambda op, a: op.acknowledge_loss(a.actor, a.note),
        store_views.status,
    )
    _acting(acknowledge)
    sweep = _verb(
        store_verbs,
        "sweep",
        "with --store: turn leases that lapsed (their proxy died) into unknown outcomes in"
        " review, each audited, as a running proxy's sweep does",
        lambda op, a: on_store.sweep(a),
        on_store.swept_view,
    )
    sweep.add_argument("--actor", default=default_actor(), help="who, for the audit log")
    sweep.set_defaults(run=on_store.run_sweep)
