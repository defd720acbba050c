"""``GET /v1/duplicates``: the repeats this proxy blocked, by agent and batch, with their top
routes (idemproxy/duplicates.py). Behind the admin token like the rest of the API."""

from __future__ import annotations

from aiohttp import web

from idemproxy.duplicates import BlockedDuplicates
from idemproxy.errors import ProblemCode, RequestRefused

BLOCKED = web.AppKey("blocked_duplicates", BlockedDuplicates)
DEFAULT_BATCHES = 10
MAX_BATCHES = 1000


def _batches(request: web.Request) -> int:
    text = request.query.get("limit", str(DEFAULT_BATCHES))
    if not text.isdigit() or not 1 <= int(text) <= MAX_BATCHES:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"limit is how many batches to show per agent: a whole number from 1 to"
            f" {MAX_BATCHES}, not {text!r}",
        )
    return int(text)


async def blocked_duplicates(request: web.Request) -> web.Response:
    agent = request.query.get("agent") or None
    summary = request.app[BLOCKED].summary(agent, _batches(request))
    return web.json_response(summary)


def add_duplicates(app: web.Application, blocked: BlockedDuplicates) -> None:
    """Mount the route on the admin app."""
    app[BLOCKED] = blocked
    app.router.add_get("/v1/duplicates", blocked_duplicates)
