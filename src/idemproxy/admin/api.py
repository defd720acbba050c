"""The admin JSON API (SPEC 7): effects, batches, the review queue, resolutions, recovery,
delivery to the recovery controller and the audit log. docs/admin-api.openapi.yaml describes
every route; ids in paths are percent-encoded (an effect key's ``/`` as ``%2F``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.approvals import Verdict
from idemproxy.ledger.documents import Document
from idemproxy.ledger.recovery import RecoverMode
from idemproxy.ledger.review import Decision
from idemproxy.ledger.service import LedgerService
from idemproxy.proxy.problems import problem_response
from idemproxy.store.errors import StoreError

LEDGER = web.AppKey("ledger", LedgerService)
DEFAULT_LIMIT = 100
MAX_TEXT_CHARS = 2000


@web.middleware
async def problems(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refusals and store outages as problem documents, in the proxy's style."""
    try:
        return await handler(request)
    except RequestRefused as refusal:
        return problem_response(
            refusal.code, refusal.detail, retry_after_s=refusal.retry_after_s, extra=refusal.extra
        )
    except StoreError as exc:
        return problem_response(
            ProblemCode.STORE_UNAVAILABLE,
            f"the store did not answer ({exc}); retry shortly",
            retry_after_s=1,
        )


def _invalid(detail: str) -> RequestRefused:
    return RequestRefused(ProblemCode.INVALID_REQUEST, detail)


async def _body(request: web.Request) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    try:
        body = await request.json()
    except ValueError:
        raise _invalid("the request body is not JSON; send a JSON object") from None
    if not isinstance(body, dict):
        raise _invalid("the request body must be a JSON object")
    return body


def _text(body: dict[str, Any], name: str, default: str = "") -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise _invalid(f"{name} must be a string of at most {MAX_TEXT_CHARS} characters")
    return value


def _actor(request: web.Request, body: dict[str, Any]) -> str:
    """Who acts, as the audit log records it: the name the caller gives, and where from."""
    name = _text(body, "actor") or "anonymous"
    return f"{name} (admin API from {request.remote or 'unknown'})"


def _limit(request: web.Request) -> int:
    text = request.query.get("limit", str(DEFAULT_LIMIT))
    if not text.isdigit():
        raise _invalid(f"limit must be a whole number, not {text!r}")
    return int(text)


def _ledger(request: web.Request) -> LedgerService:
    return request.app[LEDGER]


def _json(document: Document) -> web.Response:
    return web.json_response(document)


async def status(request: web.Request) -> web.Response:
    return _json(await _ledger(request).status())


async def effect(request: web.Request) -> web.Response:
    return _json(await _ledger(request).effect(request.match_info["key"]))


async def events(request: web.Request) -> web.Response:
    after = request.query.get("after")
    agent = request.match_info["agent"]
    return _json(await _ledger(request).events(agent, after, _limit(request)))


async def batch(request: web.Request) -> web.Response:
    info = request.match_info
    return _json(await _ledger(request).batch(info["agent"], info["batch"]))


async def batches(request: web.Request) -> web.Response:
    return _json(await _ledger(request).batches(request.match_info["agent"], _limit(request)))


async def recover(request: web.Request) -> web.Response:
    body, info = await _body(request), request.match_info
    plan = await _ledger(request).recover(
        info["agent"],
        info["batch"],
        RecoverMode.parse(_text(body, "strategy", "auto")),
        _actor(request, body),
        _text(body, "note"),
    )
    return _json(plan)


async def review(request: web.Request) -> web.Response:
    agent = request.query.get("agent")
    return _json(await _ledger(request).review(agent, _limit(request)))


async def resolve(request: web.Request) -> web.Response:
    body = await _body(request)
    response = body.get("response")
    if response is not None and not isinstance(response, dict):
        raise _invalid("response must be a JSON object")
    record = await _ledger(request).resolve(
        request.match_info["key"],
        Decision.parse(_text(body, "as")),
        _actor(request, body),
        _text(body, "note"),
        external_id=_text(body, "external_id"),
        response=response,
    )
    return _json(record)


async def approvals(request: web.Request) -> web.Response:
    agent = request.query.get("agent")
    return _json(await _ledger(request).approvals(agent, _limit(request)))


async def approval(request: web.Request) -> web.Response:
    info = request.match_info
    return _json(await _ledger(request).approval(info["agent"], info["approval"]))


async def decide(request: web.Request) -> web.Response:
    body, info = await _body(request), request.match_info
    document = await _ledger(request).decide(
        info["agent"],
        info["approval"],
        Verdict.parse(_text(body, "as")),
        _actor(request, body),
        _text(body, "note"),
    )
    return _json(document)


async def deliveries(request: web.Request) -> web.Response:
    return _json(await _ledger(request).deliveries(request.query.get("agent")))


async def retry_delivery(request: web.Request) -> web.Response:
    body = await _body(request)
    agent = request.match_info["agent"]
    return _json(
        await _ledger(request).retry_delivery(agent, _actor(request, body), _text(body, "note"))
    )


async def audit(request: web.Request) -> web.Response:
    return _json(await _ledger(request).audit(request.match_info["agent"], _limit(request)))


async def agent(request: web.Request) -> web.Response:
    return _json(await _ledger(request).agent(request.match_info["agent"]))


async def pause(request: web.Request) -> web.Response:
    body = await _body(request)
    agent_id, actor = request.match_info["agent"], _actor(request, body)
    return _json(await _ledger(request).pause(agent_id, actor, _text(body, "note")))


async def resume(request: web.Request) -> web.Response:
    body = await _body(request)
    agent_id, actor = request.match_info["agent"], _actor(request, body)
    return _json(await _ledger(request).resume(agent_id, actor, _text(body, "note")))


async def compensation(request: web.Request) -> web.Response:
    info = request.match_info
    return _json(await _ledger(request).compensation(info["agent"], info["batch"]))


async def compensate(request: web.Request) -> web.Response:
    info = request.match_info
    actor, note, credentials = await _undoing(request)
    plan = await _ledger(request).compensate(info["agent"], info["batch"], actor, note, credentials)
    return _json(plan)


async def rollback(request: web.Request) -> web.Response:
    """GET: the plan to roll the agent back to the batch; POST: run it."""
    info = request.match_info
    if request.method == "GET":
        plan = await _ledger(request).rollback(info["agent"], info["batch"], "", "", None)
        return _json(plan)
    actor, note, credentials = await _undoing(request)
    plan = await _ledger(request).rollback(info["agent"], info["batch"], actor, note, credentials)
    return _json(plan)


async def _undoing(request: web.Request) -> tuple[str, str, dict[str, dict[str, str]]]:
    """Who undoes, why, and the headers each upstream's compensation is sent with."""
    body = await _body(request)
    return _actor(request, body), _text(body, "note"), _credentials(body.get("headers", {}))


def _credentials(value: object) -> dict[str, dict[str, str]]:
    """``{"stripe": {"Authorization": "Bearer ..."}}``: headers to send to each upstream."""
    if not isinstance(value, dict) or not all(
        isinstance(headers, dict)
        and all(isinstance(n, str) and isinstance(v, str) for n, v in headers.items())
        for headers in value.values()
    ):
        raise _invalid('headers must look like {"stripe": {"Authorization": "Bearer ..."}}')
    return value


async def retry(request: web.Request) -> web.Response:
    body = await _body(request)
    key, actor = request.match_info["key"], _actor(request, body)
    return _json(await _ledger(request).retry(key, actor, _text(body, "note")))


async def store_status(request: web.Request) -> web.Response:
    return _json(await _ledger(request).store_status())


async def acknowledge_loss(request: web.Request) -> web.Response:
    body = await _body(request)
    actor, note = _actor(request, body), _text(body, "note")
    return _json(await _ledger(request).acknowledge_loss(actor, note))


def add_api(app: web.Application, service: LedgerService) -> None:
    """Mount the API on the admin app (behind its token guard)."""
    app[LEDGER] = service
    router = app.router
    router.add_get("/v1/status", status)
    router.add_get("/v1/store", store_status)
    router.add_post("/v1/store/acknowledge-loss", acknowledge_loss)
    router.add_get("/v1/effects/{key}", effect)
    router.add_get("/v1/review", review)
    router.add_get("/v1/review/{key}", effect)
    router.add_post("/v1/review/{key}/resolution", resolve)
    router.add_post("/v1/review/{key}/retry", retry)
    router.add_get("/v1/approvals", approvals)
    router.add_get("/v1/approvals/{agent}/{approval}", approval)
    router.add_post("/v1/approvals/{agent}/{approval}/decision", decide)
    router.add_get("/v1/delivery", deliveries)
    router.add_get("/v1/agents/{agent}", agent)
    router.add_post("/v1/agents/{agent}/pause", pause)
    router.add_post("/v1/agents/{agent}/resume", resume)
    router.add_get("/v1/agents/{agent}/events", events)
    router.add_get("/v1/agents/{agent}/audit", audit)
    router.add_post("/v1/agents/{agent}/delivery/retry", retry_delivery)
    router.add_get("/v1/agents/{agent}/batches", batches)
    router.add_get("/v1/agents/{agent}/batches/{batch}", batch)
    router.add_post("/v1/agents/{agent}/batches/{batch}/recover", recover)
    router.add_get("/v1/agents/{agent}/batches/{batch}/compensation", compensation)
    router.add_post("/v1/agents/{agent}/batches/{batch}/compensation", compensate)
    router.add_get("/v1/agents/{agent}/batches/{batch}/rollback", rollback)
    router.add_post("/v1/agents/{agent}/batches/{batch}/rollback", rollback)
