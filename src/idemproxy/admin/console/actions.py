"""The console's forms: sign in and out, and each operator action, as the :class:`LedgerService`
method the admin API calls too. The guards (guards.py) have already checked the origin, the
session and its CSRF token; the ledger checks the rest (compare-and-set, the per-agent rate
limit) and writes the audit entry, whose actor is ``console (<peer address>)``.

Each action answers ``303 See Other`` to the page of what it changed, with a word saying what
was done (pages.py shows the message), so a reload of that page sends nothing again. A recovery
instead answers with its plan, what the re-run of the batch will do.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from aiohttp import web
from aiohttp.typedefs import Handler

from idemproxy.admin.console.pages import LEDGER
from idemproxy.admin.console.session import Sessions, clear_cookie
from idemproxy.admin.console.views import PREFIX, page, see_other, segment
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.approvals import Verdict
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.review import Decision
from idemproxy.ledger.service import LedgerService

log = logging.getLogger(__name__)

MAX_NOTE_CHARS = 2000
# A wrong token costs its sender this long: guessing by hand stays slow, and a script gains
# little over a person.
SIGN_IN_DELAY_S = 1.0


async def _field(request: web.Request, name: str, default: str = "") -> str:
    value = (await request.post()).get(name, default)
    if not isinstance(value, str) or len(value) > MAX_NOTE_CHARS:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"{name} must be text of at most {MAX_NOTE_CHARS} characters",
        )
    return value.strip()


def _actor(request: web.Request) -> str:
    return f"console ({request.remote or 'unknown'})"


def _ledger(request: web.Request) -> LedgerService:
    return request.app[LEDGER]


def _done(location: str, word: str) -> web.Response:
    """To ``location``, saying what was done: ``word`` is a key of pages.DONE."""
    return see_other(f"{location}?done={quote(word)}")


def sign_in(sessions: Sessions, delay_s: float) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        token = (await request.post()).get("token", "")
        if not isinstance(token, str) or not sessions.admits(token):
            log.warning("console sign-in with a wrong token", extra={"remote": request.remote})
            await asyncio.sleep(delay_s)
            error = "That is not this proxy's admin token. Nothing was signed in."
            return page(request, "signin.html", 401, error=error)
        _, cookie = sessions.issue()
        response = _done(f"{PREFIX}/", "signed_in")
        sessions.set_cookie(response, cookie)
        return response

    return handler


async def sign_out(request: web.Request) -> web.StreamResponse:
    response = see_other(f"{PREFIX}/signin")
    clear_cookie(response)
    return response


async def decide(request: web.Request) -> web.StreamResponse:
    info = request.match_info
    verdict = Verdict.parse(await _field(request, "as"))
    note = await _field(request, "note")
    await _ledger(request).decide(info["agent"], info["approval"], verdict, _actor(request), note)
    location = f"{PREFIX}/approvals/{segment(info['agent'])}/{segment(info['approval'])}"
    return _done(location, verdict.value)


async def resolve(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    decision = Decision.parse(await _field(request, "as"))
    note = await _field(request, "note")
    await _ledger(request).resolve(key, decision, _actor(request), note)
    return _done(f"{PREFIX}/effects/{segment(key)}", decision.value)


async def retry(request: web.Request) -> web.StreamResponse:
    key = request.match_info["key"]
    await _ledger(request).retry(key, _actor(request), await _field(request, "note"))
    return _done(f"{PREFIX}/effects/{segment(key)}", "retried")


async def resume(request: web.Request) -> web.StreamResponse:
    agent = request.match_info["agent"]
    await _ledger(request).resume(agent, _actor(request), await _field(request, "note"))
    return _done(f"{PREFIX}/agents/{segment(agent)}", "resumed")


async def pause(request: web.Request) -> web.StreamResponse:
    agent = request.match_info["agent"]
    await _ledger(request).pause(agent, _actor(request), await _field(request, "note"))
    return _done(f"{PREFIX}/agents/{segment(agent)}", "paused")


async def recover(request: web.Request) -> web.StreamResponse:
    info = request.match_info
    mode = RecoverMode.parse(await _field(request, "strategy", RecoverMode.AUTO.value))
    note = await _field(request, "note")
    plan = await _ledger(request).recover(info["agent"], info["batch"], mode, _actor(request), note)
    # The plan, not a redirect: what the re-run will do is said once, and the batch's page may
    # be gone (a recovery that clears every record of a batch leaves nothing to show).
    return page(request, "recovered.html", plan=plan)


def add_actions(
    router: web.UrlDispatcher, sessions: Sessions, delay_s: float = SIGN_IN_DELAY_S
) -> None:
    router.add_post("/signin", sign_in(sessions, delay_s))
    router.add_post("/signout", sign_out)
    router.add_post("/approvals/{agent}/{approval}/decision", decide)
    router.add_post("/effects/{key}/resolution", resolve)
    router.add_post("/effects/{key}/retry", retry)
    router.add_post("/agents/{agent}/resume", resume)
    router.add_post("/agents/{agent}/pause", pause)
    router.add_post("/agents/{agent}/batches/{batch}/recover", recover)
