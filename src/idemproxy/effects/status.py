"""The status rules: what an upstream's answer says about the effect, and how that settles it.

Pure functions of the effect flow; the answers and refusals it makes are in answers.py and
refusals.py.
"""

from __future__ import annotations

from idemproxy.encodings import UndecodableBody
from idemproxy.jsonpointer import string_at
from idemproxy.policies.kinds import EffectClass
from idemproxy.policies.route import Route
from idemproxy.proxy.relay import Relayed
from idemproxy.recorded import readable_body
from idemproxy.store.records import RecordState, Settlement, StoredResponse


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
    state: RecordState,
    status: int,
    headers: tuple[tuple[str, str], ...],
    relayed: Relayed,
    route: Route,
) -> Settlement:
    if state is not RecordState.COMPLETED:
        return Settlement(state, reason=f"upstream answered {status}", ttl_s=route.ttl_s)
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
