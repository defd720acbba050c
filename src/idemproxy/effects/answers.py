"""Every answer the flow makes itself, from a record or a read-back, instead of relaying one.

An answer that shows an effect already done (a replay, an unknown outcome reconciled by a
read-back, an append found already present) carries the same outcome headers whichever way it
was learned (SPEC section 4): ``Idempotent-Replayed: true``, ``x-should-retry: false`` and
``Stripe-Should-Retry: false`` (retrying cannot change it), ``Idem-Outcome`` and ``Idem-Key``,
and ``Idem-Body-Truncated: true`` when the record kept only part of the body.
"""

from __future__ import annotations

import orjson
from aiohttp import ClientResponse, web
from multidict import CIMultiDict

from idemproxy.effects.envelope import HTTP, Envelope
from idemproxy.effects.outcome import Outcome, outcome_headers
from idemproxy.proxy.headers import client_response_headers
from idemproxy.proxy.problems import JSON_CONTENT_TYPE, should_retry_headers
from idemproxy.store.records import EffectRecord, StoredResponse

JSON_HEADERS = (("Content-Type", JSON_CONTENT_TYPE),)


def done_answer(stored: StoredResponse, outcome: Outcome, effect_key: str) -> web.Response:
    """The answer of an effect known to be done, from the response that records it."""
    headers: CIMultiDict[str] = CIMultiDict(stored.headers)
    headers["Idempotent-Replayed"] = "true"
    headers.extend(outcome_headers(outcome, effect_key))
    headers.extend(should_retry_headers(False))
    if stored.body_truncated:
        headers["Idem-Body-Truncated"] = "true"
    return web.Response(status=stored.status, body=stored.body, headers=headers)


def replay_response(
    record: EffectRecord, outcome: Outcome, envelope: Envelope = HTTP
) -> web.Response:
    """A completed record's answer to a repeat (replayed, coalesced or reconciled), framed for
    the repeat: an MCP call's under its own JSON-RPC id."""
    stored = record.response or applied_without_response(record)
    return done_answer(envelope.replayed(stored), outcome, str(record.key))


def applied_without_response(record: EffectRecord) -> StoredResponse:
    """What a repeat gets when an effect was resolved as applied with no response to replay."""
    body = orjson.dumps(
        {
            "idempotent_replayed": True,
            "applied": True,
            "external_id": record.external_id or None,
            "note": record.reason or "resolved as applied; no upstream response was recorded",
        }
    )
    return StoredResponse(200, JSON_HEADERS, body)


def read_answer(answer: ClientResponse, body: bytes, effect_key: str) -> web.Response:
    """The upstream's own answer, read whole, as forwarded: a read-back did not find the effect
    done, so the agent learns what the upstream said."""
    headers = client_response_headers(answer.headers)
    headers.popall("Content-Length", None)
    headers.extend(outcome_headers(Outcome.FORWARDED, effect_key))
    return web.Response(status=answer.status, body=body, headers=headers)
