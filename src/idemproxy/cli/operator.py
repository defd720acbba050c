"""Operator verbs (SPEC 7): ``status``, ``batch-status``, ``batches``, ``recover``, ``review
list|resolve|retry``, ``approvals list|show|approve|deny``, ``agent status|pause|resume``,
``delivery list|retry``, ``audit`` and ``store status|acknowledge-loss``.

Each works on a running proxy's admin API (``--admin-url``, default ``$IDEMPROXY_ADMIN_URL`` or
http://127.0.0.1:9090, token from ``--token`` or ``$IDEMPROXY_ADMIN_TOKEN``) or directly on a
store that a proxy made (``--store URL``; none is ever created here), prints a readable table,
or the JSON document with ``--json``. Exit codes: :mod:`idemproxy.cli.failures`.
"""

from __future__ import annotations

import argparse

from idemproxy.cli import (
    agent_views,
    approvals,
    batch_views,
    compensation,
    duplicates,
    on_store,
    store_views,
    views,
)
from idemproxy.cli import batches as batch_list
from idemproxy.cli.verbs import Verbs, acting, default_actor, verb
from idemproxy.ledger.review import Decision


def register(verbs: Verbs) -> None:
    verb(verbs, "status", "unknown outcomes, paused agents and events of every agent; exits 1"
          " when any wait for an operator", lambda op, a: op.status(), views.status,
          views.status_exit_rule)  # fmt: skip

    batch = verb(verbs, "batch-status", "a batch's progress and recovery strategy",
                  lambda op, a: op.batch(a.agent, a.batch), batch_views.batch)  # fmt: skip
    batch.add_argument("agent")
    batch.add_argument("batch")

    batch_list.add_arguments(
        verb(verbs, "batches", batch_list.HELP, batch_list.fetch, batch_list.view)
    )

    recover = verb(
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
    acting(recover)

    _register_review(verbs.add_parser("review", help="the queue of unknown outcomes"))
    approvals.register(verbs.add_parser("approvals", help=approvals.HELP))
    _register_agent(verbs.add_parser("agent", help="pause an agent, or resume it once fixed"))
    _register_delivery(
        verbs.add_parser("delivery", help="delivery of events to the recovery controller")
    )

    _register_store(
        verbs.add_parser("store", help="whether the store keeps records, and what it lost")
    )

    duplicates.add_arguments(
        verb(verbs, "duplicates", duplicates.HELP, duplicates.fetch, duplicates.view)
    )

    audit = verb(verbs, "audit", "an agent's audit log of operator actions",
                  lambda op, a: op.audit(a.agent, a.limit), views.audit)  # fmt: skip
    audit.add_argument("agent")
    audit.add_argument("--limit", type=int, default=100)


def _register_review(review: argparse.ArgumentParser) -> None:
    review_verbs = review.add_subparsers(dest="review_verb", required=True, metavar="VERB")
    listing = verb(review_verbs, "list", "effects awaiting a decision, oldest first",
                    lambda op, a: op.review(a.agent, a.limit), views.review)  # fmt: skip
    listing.add_argument("--agent", help="only this agent")
    listing.add_argument("--limit", type=int, default=100)
    resolve = verb(
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
    acting(resolve)
    retry = verb(
        review_verbs,
        "retry",
        "free a failed effect so that its next request is sent again (compare-and-set)",
        lambda op, a: op.retry(a.key, a.actor, a.note),
        views.record,
    )
    retry.add_argument("key", help="the effect key, as in Idem-Key or batch-status")
    acting(retry)


def _register_agent(agent: argparse.ArgumentParser) -> None:
    agent_verbs = agent.add_subparsers(dest="agent_verb", required=True, metavar="VERB")
    status = verb(agent_verbs, "status", "the agent's pause, failures and snapshot",
                   lambda op, a: op.agent(a.agent), agent_views.agent)  # fmt: skip
    pause = verb(agent_verbs, "pause", "hold every effect of the agent until it is resumed",
                  lambda op, a: op.pause(a.agent, a.actor, a.note), agent_views.agent)  # fmt: skip
    resume = verb(
        agent_verbs,
        "resume",
        "mark the cause fixed: free the pause's failed effects, then let the agent act again",
        lambda op, a: op.resume(a.agent, a.actor, a.note),
        agent_views.resumed,
    )
    for parser in (status, pause, resume):
        parser.add_argument("agent")
    acting(pause)
    acting(resume)


def _register_delivery(delivery: argparse.ArgumentParser) -> None:
    delivery_verbs = delivery.add_subparsers(dest="delivery_verb", required=True, metavar="VERB")
    listing = verb(delivery_verbs, "list", "backlog and parked deliveries per agent",
                    lambda op, a: op.deliveries(a.agent), views.deliveries)  # fmt: skip
    listing.add_argument("--agent", help="only this agent")
    retry = verb(
        delivery_verbs,
        "retry",
        "send an agent's parked events again",
        lambda op, a: op.retry_delivery(a.agent, a.actor, a.note),
        views.deliveries,
    )
    retry.add_argument("agent")
    acting(retry)


def _register_store(store: argparse.ArgumentParser) -> None:
    store_verbs = store.add_subparsers(dest="store_verb", required=True, metavar="VERB")
    verb(store_verbs, "status", "whether the store can keep records, whether it lost some;"
          " exits 1 unless it is ready", lambda op, a: op.store_status(), store_views.status,
          store_views.status_exit_rule)  # fmt: skip
    acknowledge = verb(
        store_verbs,
        "acknowledge-loss",
        "let effects go ahead again after the store lost records, once what the effects"
        " before the loss did has been checked at the upstreams",
        lambda op, a: op.acknowledge_loss(a.actor, a.note),
        store_views.status,
    )
    acting(acknowledge)
    sweep = verb(
        store_verbs,
        "sweep",
        "with --store: turn leases that lapsed (their proxy died) into unknown outcomes in"
        " review, each audited, as a running proxy's sweep does",
        lambda op, a: on_store.sweep(a),
        on_store.swept_view,
    )
    sweep.add_argument("--actor", default=default_actor(), help="who, for the audit log")
    sweep.set_defaults(run=on_store.run_sweep)
