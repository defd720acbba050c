"""What an upstream answer, or a standing record, means for the agent.

Pure functions of the effect flow: how a status settles a record, what a replay looks like,
and the refusals a record's state calls for.
"""

from __future__ import annotations

from urllib.parse import quote

import orjson
from aiohttp import web
from multidict import CIMultiDict

from idemproxy.answers import readable_body
from idemproxy.encodings import UndecodableBody
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.jsonpointer import string_at
from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.route import Route
from idemproxy.proxy.outcome import Outcome, outcome_headers
from idemproxy.proxy.problems import should_retry_headers
from idemproxy.proxy.relay import Relayed
from idemproxy.store.records import (
    EffectRecord,
    RecordState,
    Settlement,
    StoredResponse,
    Unreplicated,
)


def store_unavailable() -> RequestRefused:
    return RequestRefused(
        ProblemCode.STORE_UNAVAILABLE,
        "the effect store is unreachable, so nothing was forwarded; retry shortly",
        retry_after_s=1,
    )


def store_not_replicated(unreplicated: Unreplicated) -> RequestRefused:
    return RequestRefused(
        ProblemCode.STORE_NOT_REPLICATED,
        f"the store's replicas did not confirm the claim ({unreplicated}), so a failover could"
        " lose it: nothing was forwarded and the key stays free; retry shortly",
        retry_after_s=1,
    )


def classify_status(status: int, route: Route) -> RecordState:
    """What an upstream status says about the effect."""
    if status in route.not_applied_statuses:
        return RecordState.NOT_APPLIED
    if status >= 500:
        # A 5xx may come after the effect was applied; a generation may simply be retried.
        if route.effect is EffectClass.GENERATION:
            return RecordState.NOT_APPLIED
        return RecordState.UNKNOWN
    return RecordState.COMPLETED


def settlement_for(
    verdict: RecordState,
    status: int,
    headers: tuple[tuple[str, str], ...],
    relayed: Relayed,
    route: Route,
) -> Settlement:
    if verdict is not RecordState.COMPLETED:
        return Settlement(verdict, reason=f"upstream answered {status}", ttl_s=route.ttl_s)
    if not relayed.complete and route.effect is EffectClass.GENERATION:
        return Settlement(
            RecordState.NOT_APPLIED, reason="response stream broke off", ttl_s=route.ttl_s
        )
    truncated = relayed.truncated or not relayed.complete
    response = StoredResponse(status, headers, relayed.body, body_truncated=truncated)
    return Settlement(
        RecordState.COMPLETED,
        response=response,
        external_id=external_id(response, route),
        reason="" if relayed.complete else "upstream body broke off after the status arrived",
        ttl_s=route.ttl_s,
    )


def external_id(response: StoredResponse, route: Route) -> str:
    """The route's external id in the answer, "" where it has none or cannot be read."""
    if not route.external_id:
        return ""
    try:
        body = readable_body(response, route.max_recorded_bytes)
    except UndecodableBody:
        return ""
    return string_at(body, route.external_id)


def replay_response(record: EffectRecord, outcome: Outcome) -> web.Response:
    stored = record.response or applied_without_response(record)
    headers: CIMultiDict[str] = CIMultiDict(stored.headers)
    headers["Idempotent-Replayed"] = "true"
    headers.extend(outcome_headers(outcome, str(record.key)))
    headers.extend(should_retry_headers(False))
    if stored.body_truncated:
        headers["Idem-Body-Truncated"] = "true"
    return web.Response(status=stored.status, body=stored.body, headers=headers)


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
    return StoredResponse(200, (("Content-Type", "application/json"),), body)


def outcome_unknown(record: EffectRecord) -> RequestRefused:
    return RequestRefused(
        ProblemCode.OUTCOME_UNKNOWN,
        "an earlier attempt may have taken effect but no answer was recorded"
        f" ({record.reason or 'no reason recorded'}); it waits in the review queue and is not"
        " re-sent. An operator resolves it with `idemproxy review resolve`.",
        extra={"review": "/v1/review/" + quote(str(record.key), safe=""), "state": "unknown"},
    )
