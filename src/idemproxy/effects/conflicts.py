"""What a request gets when its key already belongs to a different request (SPEC section 3).

A tool call's key names the effect the tool call makes, not its wording: a re-run the LLM
worded anew is told what the tool call already did and is never acted on again. An
``Idempotency-Key`` reused for another request is refused (422), and told what the key did.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson

from idemproxy.effectkeys import STEP_HEADER, TOOL_CALL_HEADER
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.store.records import EffectRecord, RecordState

# A recorded answer up to this size rides in the refusal as JSON; a larger one is read through
# the admin API, so a refusal never carries a replay's worth of bytes.
MAX_INLINE_ANSWER_BYTES = 4096

ANOTHER_EFFECT = (
    f"send {STEP_HEADER} with a value of its own for each effect of the tool call"
    f" (1, 2, 3 for a thread of posts), or use a new {TOOL_CALL_HEADER} id"
)


def tool_call_already_acted(record: EffectRecord) -> RequestRefused:
    """A tool call's request that differs from the completed effect its key already made."""
    meta = record.meta
    return RequestRefused(
        ProblemCode.TOOL_CALL_ALREADY_ACTED,
        f"tool call {meta.tool_call!r} of batch {meta.batch!r} already sent its"
        f" {meta.action} request ({_what_it_did(record)}); this request differs from it"
        " (method, path or body) and was not sent. If this is a re-run, take the recorded"
        " answer as the tool call's result. To make a further, different effect,"
        f" {ANOTHER_EFFECT}.",
        extra={**_recorded(record), "another_effect": ANOTHER_EFFECT},
    )


def idempotency_key_reused(record: EffectRecord) -> RequestRefused:
    """An ``Idempotency-Key`` sent again with another request than the one it came with."""
    return RequestRefused(
        ProblemCode.IDEMPOTENCY_KEY_REUSED,
        f"this Idempotency-Key already belongs to another request ({_what_it_did(record)});"
        " this one was not sent. A re-run of that operation must send this same key with the"
        " same request, never a new key, or it may act twice; only a deliberately new effect"
        " gets a new key.",
        extra=_recorded(record),
    )


def _what_it_did(record: EffectRecord) -> str:
    sent = f"{record.meta.method} {record.meta.path}".strip()
    if record.state is RecordState.COMPLETED:
        status = record.response.status if record.response is not None else "applied"
        made = f", external id {record.external_id}" if record.external_id else ""
        return f"{sent}: answered {status}{made}"
    if record.state is RecordState.NOT_APPLIED:
        return f"{sent}: not applied, {record.reason or 'nothing happened'}"
    if record.state is RecordState.UNKNOWN:
        return f"{sent}: outcome unknown, waiting in the review queue"
    return f"{sent}: still in flight"


def _recorded(record: EffectRecord) -> dict[str, Any]:
    """The facts of the record an agent can act on, and where to read the rest."""
    facts: dict[str, Any] = {
        "state": str(record.state),
        "effect": "/v1/effects/" + quote(str(record.key), safe=""),
    }
    if record.external_id:
        facts["external_id"] = record.external_id
    response = record.response
    if response is not None:
        facts["recorded_status"] = response.status
        answer = _inline_answer(response.body, response.body_truncated)
        if answer is not None:
            facts["recorded_answer"] = answer
    return facts


def _inline_answer(body: bytes, truncated: bool) -> Any:
    if truncated or not body or len(body) > MAX_INLINE_ANSWER_BYTES:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
