"""A fake upstream that keeps a ledger of every effect it applied, and misbehaves on schedule.

Run as a subprocess (``python -m tests.support.chaos_upstream PORT``) by the chaos and cluster
suites. Each effect is ``POST /<anything>/effects`` with a JSON body whose ``effect`` field names
the effect (or a multipart body whose ``payload_json`` part is that JSON); the ledger groups
applications by it, so an effect applied twice is plain to see.

Faults are drawn per request from rates the test sets with ``PUT /_faults``; what each one
models, and whether the effect took place:

=========  =========  ==============================================================
fault      applied    answer
=========  =========  ==============================================================
(none)     yes        200 ``{"id": N, "effect": ...}``
``429``    no         429 with ``Retry-After: 0`` (rate limited before acting)
``503``    no         503 (overloaded before acting; the proxy cannot know that)
``500``    yes        500 (crashed after acting)
``drop``   yes        the connection is cut after the request was read
``hang``   yes        200, but only after ``hang_s``: longer than the proxy waits
=========  =========  ==============================================================

The same process plays the recovery controller: ``POST /_controller`` takes idemproxy's signed
event deliveries, checks each signature, and refuses a share of them with 503 (the fault
``controller_503``) so that deliveries are retried.

``GET /_ledger`` returns ``{"applied": {effect: [id, ...]}, "received": {effect: n},
"faults": {kind: n}, "open": n, "controller": {agent: [[event_id, type, effect_key], ...]},
"bad_signatures": n}``: ``open`` counts requests still being answered, and ``controller``
lists every event accepted, in the order they arrived, re-sent ones included.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

import orjson
from aiohttp import web

from idemproxy.ledger import signature
from tests.support.fakes.service import form_parts


class Fault(StrEnum):
    RATE_LIMITED = "429"
    OVERLOADED = "503"
    CRASHED = "500"
    DROP = "drop"
    HANG = "hang"


NOT_APPLIED = frozenset({Fault.RATE_LIMITED, Fault.OVERLOADED})
CONTROLLER_FAULT = "controller_503"


@dataclass
class Ledger:
    applied: dict[str, list[int]] = field(default_factory=dict)
    received: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    rates: dict[Fault, float] = field(default_factory=dict)
    hang_s: float = 3.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    next_id: int = 0
    open: int = 0
    controller_failure_rate: float = 0.0
    controller_secret: str = ""
    controller: dict[str, list[list[str]]] = field(default_factory=dict)
    bad_signatures: int = 0

    def draw(self) -> Fault | None:
        roll = self.rng.random()
        for fault, rate in self.rates.items():
            if roll < rate:
                return fault
            roll -= rate
        return None

    def apply(self, effect: str) -> int:
        self.next_id += 1
        self.applied.setdefault(effect, []).append(self.next_id)
        return self.next_id


LEDGER = web.AppKey("ledger", Ledger)


def effect_named(request: web.Request, body: bytes) -> str:
    """The ``effect`` of a JSON body, or of the ``payload_json`` part of a multipart one."""
    if request.content_type == "multipart/form-data":
        body = form_parts(request.headers["Content-Type"], body)["payload_json"][1]
    return str(orjson.loads(body)["effect"])


async def effects(request: web.Request) -> web.StreamResponse:
    ledger = request.app[LEDGER]
    effect = effect_named(request, await request.read())
    ledger.received[effect] += 1
    fault = ledger.draw()
    if fault is not None:
        ledger.faults[str(fault)] += 1
    if fault in NOT_APPLIED:
        return web.json_response({"error": str(fault)}, status=int(fault), headers=_retry_now())
    effect_id = ledger.apply(effect)
    answer = {"id": effect_id, "effect": effect}
    if fault is Fault.CRASHED:
        return web.json_response({"error": "crashed after acting", **answer}, status=500)
    if fault is Fault.DROP:
        assert request.transport is not None
        request.transport.close()
        return web.Response()
    if fault is Fault.HANG:
        ledger.open += 1
        try:
            await asyncio.sleep(ledger.hang_s)
        finally:
            ledger.open -= 1
    return web.json_response(answer)


def _retry_now() -> dict[str, str]:
    return {"Retry-After": "0"}


async def controller(request: web.Request) -> web.Response:
    """The recovery controller's webhook: verify, maybe fail, else note every event."""
    ledger = request.app[LEDGER]
    body = await request.read()
    if not signature.verify(ledger.controller_secret, request.headers, body):
        ledger.bad_signatures += 1
        return web.json_response({"error": "bad signature"}, status=401)
    if ledger.rng.random() < ledger.controller_failure_rate:
        ledger.faults[CONTROLLER_FAULT] += 1
        return web.json_response({"error": "controller unavailable"}, status=503)
    delivery = orjson.loads(body)
    arrived = ledger.controller.setdefault(delivery["agent"], [])
    arrived += [[e["event_id"], e["type"], e["effect_key"]] for e in delivery["events"]]
    return web.json_response({"accepted": len(delivery["events"])})


async def set_faults(request: web.Request) -> web.Response:
    """``{"rates": {fault: probability}, "hang_s": s, "seed": n, "controller_failure_rate": p,
    "controller_secret": s}``; rates sum to at most 1."""
    ledger = request.app[LEDGER]
    document = orjson.loads(await request.read())
    rates = {Fault(name): float(rate) for name, rate in document.get("rates", {}).items()}
    if sum(rates.values()) > 1:
        raise web.HTTPBadRequest(text="fault rates add up to more than 1")
    ledger.rates = rates
    ledger.hang_s = float(document.get("hang_s", ledger.hang_s))
    if "seed" in document:
        ledger.rng = random.Random(int(document["seed"]))
    ledger.controller_failure_rate = float(document.get("controller_failure_rate", 0.0))
    ledger.controller_secret = str(document.get("controller_secret", ledger.controller_secret))
    return web.json_response({"rates": {str(k): v for k, v in rates.items()}})


async def read_ledger(request: web.Request) -> web.Response:
    ledger = request.app[LEDGER]
    document = {
        "applied": ledger.applied,
        "received": dict(ledger.received),
        "faults": dict(ledger.faults),
        "open": ledger.open,
        "controller": ledger.controller,
        "bad_signatures": ledger.bad_signatures,
    }
    return web.Response(body=orjson.dumps(document), content_type="application/json")


def build_chaos_upstream_app() -> web.Application:
    app = web.Application()
    app[LEDGER] = Ledger()
    app.router.add_put("/_faults", set_faults)
    app.router.add_get("/_ledger", read_ledger)
    app.router.add_post("/_controller", controller)
    app.router.add_post("/{prefix:.*}effects", effects)
    return app


if __name__ == "__main__":
    web.run_app(
        build_chaos_upstream_app(),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        print=None,
        shutdown_timeout=0.5,
        access_log=None,
    )
