"""A Stripe API that honours ``Idempotency-Key`` like the real one.

A request under a key it has seen gets the first answer again (``Idempotent-Replayed: true``);
the same key with other parameters is a 400 ``idempotency_error``. Only requests that ran are
remembered: a failure before running (a 503 from the edge) leaves the key unused. Keys are kept
per account (``Stripe-Account``, else the key's own) and mode, as Stripe keeps them, so two
accounts may use one key for two different requests. Payment intents and charges
(``/v1/charges``) are each an effect; refunds undo payment intents.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from tests.support.fakes.service import Service, json_answer, perform


class StripeService(Service):
    def __init__(self) -> None:
        super().__init__()
        self.intents: dict[str, dict[str, Any]] = {}
        # (account, mode, Idempotency-Key) -> (parameters, status, answer)
        self.keys: dict[tuple[str, str, str], tuple[bytes, int, bytes]] = {}
        # payment intent id -> the account it was made on
        self.accounts: dict[str, str] = {}
        self.refunds: list[dict[str, Any]] = []
        self.charges: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)


STRIPE = web.AppKey("stripe", StripeService)
# Makes the object a create request asks for, from its parameters, on an account.
Creator = Callable[[StripeService, dict[str, str], str], dict[str, Any]]
# Requests without Stripe-Account act on the account that owns the API key; the fake knows one.
PLATFORM_ACCOUNT = "acct_platform"


def _error(kind: str, message: str, status: int) -> web.Response:
    return json_answer({"error": {"type": kind, "message": message}}, status=status)


def _new_intent(service: StripeService, params: dict[str, str], account: str) -> dict[str, Any]:
    intent = {
        "id": f"pi_{next(service._ids):06d}",
        "object": "payment_intent",
        "amount": int(params["amount"]),
        "currency": params["currency"],
        # confirm=true with a payment method charges at once, as the real API does.
        "status": "succeeded" if params.get("confirm") == "true" else "requires_payment_method",
        "metadata": {k[9:-1]: v for k, v in params.items() if k.startswith("metadata[")},
    }
    service.intents[str(intent["id"])] = intent
    service.accounts[str(intent["id"])] = account
    return intent


def _new_charge(service: StripeService, params: dict[str, str], account: str) -> dict[str, Any]:
    charge = {
        "id": f"ch_{next(service._ids):06d}",
        "object": "charge",
        "amount": int(params["amount"]),
        "currency": params["currency"],
        "paid": True,
        "status": "succeeded",
    }
    service.charges[str(charge["id"])] = charge
    service.accounts[str(charge["id"])] = account
    return charge


def creating(operation: str, new: Creator) -> Handler:
    """A create endpoint (``POST /v1/payment_intents``, ``/v1/charges``) under Stripe's
    idempotency rules; each object it makes is one effect."""

    async def create(request: web.Request) -> web.Response:
        service = request.app[STRIPE]
        body = await service.record(request)
        if not request.headers.get("Authorization", "").startswith("Bearer sk_test_"):
            return _error("invalid_request_error", "Invalid API Key provided", 401)
        params = dict(parse_qsl(body.decode()))
        key = request.headers.get("Idempotency-Key", "")
        account = request.headers.get("Stripe-Account", PLATFORM_ACCOUNT)
        scoped_key = (account, "test", key)
        canonical = orjson.dumps(sorted(params.items()))
        if scoped_key in service.keys:
            first_params, status, answer = service.keys[scoped_key]
            if first_params != canonical:
                return _error(
                    "idempotency_error",
                    "Keys for idempotent requests can only be used with the same parameters",
                    400,
                )
            headers = {"Idempotent-Replayed": "true", "Idempotency-Key": key}
            return web.Response(
                status=status, body=answer, content_type="application/json", headers=headers
            )

        def apply() -> web.Response:
            made = new(service, params, account)
            service.effects.append(made)
            answer = orjson.dumps(made)
            if key:
                service.keys[scoped_key] = (canonical, 200, answer)
            return web.Response(body=answer, content_type="application/json")

        return await perform(request, service, operation, apply)

    return create


create_intent = creating("create", _new_intent)


async def retrieve_intent(request: web.Request) -> web.Response:
    service = request.app[STRIPE]
    await service.record(request)
    intent = service.intents.get(request.match_info["id"])
    if intent is None:
        return _error("invalid_request_error", "No such payment_intent", 404)
    return json_answer(intent)


async def create_refund(request: web.Request) -> web.Response:
    """A refund of a payment intent's charge; a second refund of it is refused, as Stripe does."""
    service = request.app[STRIPE]
    params = dict(parse_qsl((await service.record(request)).decode()))
    intent = service.intents.get(params.get("payment_intent", ""))
    if intent is None:
        return _error("invalid_request_error", "No such payment_intent", 404)
    if intent["status"] != "succeeded":
        return _error("invalid_request_error", "This PaymentIntent has no charge to refund", 400)
    if any(refund["payment_intent"] == intent["id"] for refund in service.refunds):
        return _error("invalid_request_error", "Charge has already been refunded.", 400)

    def apply() -> web.Response:
        refund = {
            "id": f"re_{len(service.refunds) + 1:06d}",
            "object": "refund",
            "payment_intent": intent["id"],
            "amount": intent["amount"],
            "status": "succeeded",
        }
        service.refunds.append(refund)
        return json_answer(refund)

    return await perform(request, service, "refund", apply)


def build_stripe_app() -> web.Application:
    app = web.Application()
    app[STRIPE] = StripeService()
    app.router.add_post("/v1/payment_intents", create_intent)
    app.router.add_post("/v1/charges", creating("charge", _new_charge))
    app.router.add_get("/v1/payment_intents/{id}", retrieve_intent)
    app.router.add_post("/v1/refunds", create_refund)
    return app
