"""Operator verbs (SPEC 7): ``status``, ``batch-status``, ``recover``, ``review
list|resolve|retry``, ``agent status|pause|resume``, ``delivery list|retry``, ``audit`` and
``store status|acknowledge-loss``.

Each works on a running proxy's admin API (``--admin-url``, default ``$IDEMPROXY_ADMIN_URL`` or
http://127.0.0.1:9090, token from ``$IDEMPROXY_ADMIN_TOKEN``) or directly on a store
(``--store URL``), prints a readable table, or the JSON document with ``--json``. A refusal
(unknown key, a record that moved on, a rate limit) exits 1 with the reason; a bad URL exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeAlias

import orjson

from idemproxy.admin.client import AdminClient
from idemproxy.cli import agent_views, compensation, duplicates, store_views, views
from idemproxy.errors import ConfigError, RequestRefused
from idemproxy.ledger.documents import Document
from idemproxy.ledger.service import LedgerService, Operator
from idemproxy.store.base import InvalidStoreURL, StoreError
from idemproxy.store.factory import open_store

EXIT_REFUSED = 1
DEFAULT_ADMIN_URL = "http://127.0.0.1:9090"

Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Call = Callable[[Operator, argparse.Namespace], Awaitable[Document]]
View = Callable[[Document], str]


def default_actor() -> str:
    """Who the audit log says acted: the login and host running the command."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid-{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@contextlib.asynccontextmanager
async def _operator(args: argparse.Namespace) -> AsyncIterator[Operator]:
    if args.store:
        try:
            store = open_store(args.store)
        except InvalidStoreURL as exc:
            raise ConfigError(str(exc)) from exc
        try:
            yield LedgerService(store)
        finally:
            await store.close()
        return
    client = AdminClient(args.admin_url, os.environ.get("IDEMPROXY_ADMIN_TOKEN"))
    try:
        yield client
    finally:
        await client.close()


async def _call(args: argparse.Namespace, call: Call) -> Document:
    async with _operator(args) as operator:
        return await call(operator, args)


def _runner(call: Call, view: View) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            document = asyncio.run(_call(args, call))
        except RequestRefused as refusal:
            print(f"idemproxy: {refusal.detail}", file=sys.stderr)
            if "state" in refusal.extra:
                print(f"current state: {refusal.extra['state']}", file=sys.stderr)
            return EXIT_REFUSED
        except StoreError as exc:
            print(f"idemproxy: the store is unavailable: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        print(
            orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
            if args.json
            else view(document)
        )
        return 0

    return run


def _verb(
    verbs: Verbs, name: str, help_text: str, call: Call, view: View
) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text, description=help_text)
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--admin-url",
        default=os.environ.get("IDEMPROXY_ADMIN_URL", DEFAULT_ADMIN_URL),
        help="a running proxy's admin listener (token from IDEMPROXY_ADMIN_TOKEN)",
    )
    source.add_argument("--store", help="work on this store instead: redis://..., sqlite:///...")
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.set_defaults(run=_runner(call, view))
    return parser


def _acting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--note", default="", help="why, for the audit log")
    parser.add_argument("--actor", default=default_actor(), help="who, for the audit log")


def register(verbs: Verbs) -> None:
    _verb(verbs, "status", "unknown outcomes and delivery backlog of every agent",
          lambda op, a: op.status(), views.status)  # fmt: skip

    batch = _verb(verbs, "batch-status", "a batch's progress and recovery strategy",
                  lambda op, a: op.batch(a.agent, a.batch), views.batch)  # fmt: skip
    batch.add_argument("agent")
    batch.add_argument("batch")

    recover = _verb(
        verbs,
        "recover",
        "prepare a batch's re-run (auto, restart), archive it (abandon), or undo its completed"
        " effects (compensate)",
        compensation.recover,
        compensation.recovered,
    )
    recover.add_argument("agent")
    recover.add_argument("batch")
    recover.add_argument(
        "--strategy", choices=["auto", "restart", "abandon", "compensate"], default="auto"
    )
    recover.add_argument(
        "--yes", action="store_true", help="compensate: send them (without it: show the plan)"
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
    listing = _verb(review_verbs, "list", "effects awaiting a verdict, oldest first",
                    lambda op, a: op.review(a.agent, a.limit), views.review)  # fmt: skip
    listing.add_argument("--agent", help="only this agent")
    listing.add_argument("--limit", type=int, default=100)
    resolve = _verb(
        review_verbs,
        "resolve",
        "say whether an effect happened (compare-and-set: only while it is unknown)",
        lambda op, a: op.resolve(a.key, a.verdict, a.actor, a.note, a.external_id),
        views.record,
    )
    resolve.add_argument("key", help="the effect key, as in Idem-Key or the review list")
    resolve.add_argument(
        "--as", dest="verdict", required=True, choices=["applied", "not-applied", "not_applied"]
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
    _verb(store_verbs, "status", "whether the store can keep records, whether it lost some",
          lambda op, a: op.store_status(), store_views.status)  # fmt: skip
    acknowledge = _verb(
        store_verbs,
        "acknowledge-loss",
        "let effects go ahead again after the store lost records, once what the effects"
        " before the loss did has been checked at the upstreams",
        lambda op, a: op.acknowledge_loss(a.actor, a.note),
        store_views.status,
    )
    _acting(acknowledge)
