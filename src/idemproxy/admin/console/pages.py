"""The console's pages: what the operator reads. Each is one or a few :class:`LedgerService`
calls rendered as HTML; the forms on them post to actions.py.

What a page shows of a request is what the ledger's documents hold: method, path and the
effect's metadata, and for a held request its summary, whose secrets the proxy redacted when it
held it. No page shows a body or a header of a recorded request or answer.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from idemproxy.admin.console.views import message, page
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.documents import Document
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.service import LedgerService
from idemproxy.proxy.problems import problem_status
from idemproxy.store.errors import StoreError

log = logging.getLogger(__name__)

LEDGER = web.AppKey("console_ledger", LedgerService)
LIST_LIMIT = 50
AUDIT_LIMIT = 50
# The overview's recent batches: the newest few of each of the first agents.
AGENTS_WITH_BATCHES = 20
BATCHES_PER_AGENT = 5
RECENT_BATCHES = 20

# What an action did, by the word its redirect carries (never text from the request).
DONE = {
    "approved": "Approved: the agent's next repeat of this request is sent, once.",
    "denied": "Denied: the agent's repeats of this request are refused with your note.",
    "applied": "Resolved as applied: repeats replay the recorded outcome.",
    "not_applied": "Resolved as not applied: the key is freed, and the next repeat is sent.",
    "retried": "Freed: the effect's next request is sent again.",
    "resumed": "Resumed: the agent's effects go ahead again.",
    "paused": "Paused: the agent's effects are refused until it is resumed.",
    "signed_in": "Signed in.",
}

TITLES = {
    ProblemCode.NOT_FOUND: "Not found",
    ProblemCode.STATE_CONFLICT: "Nothing changed",
    ProblemCode.INVALID_REQUEST: "Not a valid request",
}


@web.middleware
async def refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The ledger's refusals and store outages as pages that say what happened."""
    try:
        return await handler(request)
    except RequestRefused as refusal:
        title = TITLES.get(refusal.code, "Refused")
        return message(request, problem_status(refusal.code), title, refusal.detail)
    except StoreError as exc:
        log.warning("the console could not read the store: %s", exc)
        return message(
            request, 503, "Store unavailable", f"The store did not answer ({exc}); retry shortly."
        )


def _ledger(request: web.Request) -> LedgerService:
    return request.app[LEDGER]


def _done(request: web.Request) -> str:
    return DONE.get(request.query.get("done", ""), "")


def _page(request: web.Request, template: str, **context: Any) -> web.Response:
    return page(request, template, done=_done(request), **context)


async def _recent_batches(ledger: LedgerService, agents: list[Document]) -> list[Document]:
    recent: list[Document] = []
    for agent in agents[:AGENTS_WITH_BATCHES]:
        listing = await ledger.batches(agent["agent"], BATCHES_PER_AGENT)
        recent += [{"agent": agent["agent"], **batch} for batch in listing["batches"]]
    recent.sort(key=lambda batch: batch["updated_ms"], reverse=True)
    return recent[:RECENT_BATCHES]


async def overview(request: web.Request) -> web.Response:
    """What needs someone: paused agents and agents in error, the review queue, approvals
    waiting, and the recent batches with their progress."""
    ledger = _ledger(request)
    status = await ledger.status()
    agents = status["agents"]
    return _page(
        request,
        "overview.html",
        status=status,
        attention=[agent for agent in agents if agent["paused"] or agent["error"]],
        review=(await ledger.review(None, LIST_LIMIT))["items"],
        approvals=(await ledger.approvals(None, LIST_LIMIT))["items"],
        batches=await _recent_batches(ledger, agents),
    )


async def approval(request: web.Request) -> web.Response:
    info = request.match_info
    item = await _ledger(request).approval(info["agent"], info["approval"])
    return _page(request, "approval.html", item=item)


async def effect(request: web.Request) -> web.Response:
    record = await _ledger(request).effect(request.match_info["key"])
    failed = record["state"] == "completed" and record["status"] >= 400
    return _page(request, "effect.html", item=record, failed=failed)


async def agent(request: web.Request) -> web.Response:
    """The agent's pause and error, its batches, and its audit log."""
    ledger, name = _ledger(request), request.match_info["agent"]
    return _page(
        request,
        "agent.html",
        agent=await ledger.agent(name),
        batches=(await ledger.batches(name, LIST_LIMIT))["batches"],
        audit=(await ledger.audit(name, AUDIT_LIMIT))["entries"],
    )


async def batch(request: web.Request) -> web.Response:
    info = request.match_info
    progress = await _ledger(request).batch(info["agent"], info["batch"])
    return _page(
        request, "batch.html", progress=progress, modes=[mode.value for mode in RecoverMode]
    )


async def sign_in_form(request: web.Request) -> web.Response:
    return page(request, "signin.html", error="")


async def not_found(request: web.Request) -> web.Response:
    return message(request, 404, "Not found", f"The console has no page at {request.path}.")


def add_pages(router: web.UrlDispatcher) -> None:
    router.add_get("", overview)
    router.add_get("/", overview)
    router.add_get("/signin", sign_in_form)
    router.add_get("/approvals/{agent}/{approval}", approval)
    router.add_get("/effects/{key}", effect)
    router.add_get("/agents/{agent}", agent)
    router.add_get("/agents/{agent}/batches/{batch}", batch)


def add_fallback(router: web.UrlDispatcher) -> None:
    """Last: any other path under the console is its own 404 page, not the admin API's."""
    router.add_route("*", "/{tail:.*}", not_found)
