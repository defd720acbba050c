"""An effect record from its Redis hash, and a stored response as the scripts take it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from idemproxy.store.errors import StoreCorrupt, StoreUnavailable
from idemproxy.store.headers import dump_headers, load_headers
from idemproxy.store.records import (
    Claimed,
    ClaimResult,
    EffectMeta,
    EffectRecord,
    Paused,
    RecordKey,
    RecordState,
    Standing,
    StoredResponse,
    Unreplicated,
)
from idemproxy.store.redis.argv import NO_RESPONSE, ResponseArgs
from idemproxy.store.redis.control import decode_pause
from idemproxy.store.redis.fields import RecordField


def response_args(response: StoredResponse | None) -> ResponseArgs:
    """A response as settle and resolve take it; None, a record without one."""
    if response is None:
        return NO_RESPONSE
    headers = dump_headers(response.headers)
    return ResponseArgs(True, response.status, headers, response.body, response.body_truncated)


def decode_record(key: RecordKey, raw: Any) -> EffectRecord:
    """A record from its hash: ``HGETALL`` as a dict of bytes, or flat from a script."""
    try:
        fields: dict[bytes, bytes]
        fields = raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))

        def text(name: str) -> str:
            return fields[name.encode()].decode()

        response = None
        if RecordField.STATUS.encode() in fields:
            response = StoredResponse(
                status=int(text(RecordField.STATUS)),
                headers=load_headers(fields[RecordField.HEADERS.encode()]),
                body=fields[RecordField.BODY.encode()],
                body_truncated=text(RecordField.TRUNCATED) == "1",
            )
        return EffectRecord(
            key=key,
            state=RecordState(text(RecordField.STATE)),
            fence=int(text(RecordField.FENCE)),
            fingerprint=text(RecordField.FINGERPRINT),
            meta=EffectMeta(
                batch=text(RecordField.BATCH),
                tool_call=text(RecordField.TOOL_CALL),
                action=text(RecordField.ACTION),
                upstream=text(RecordField.UPSTREAM),
                method=text(RecordField.METHOD),
                path=text(RecordField.PATH),
            ),
            lease_expires_ms=int(text(RecordField.LEASE_EXPIRES_MS)),
            created_ms=int(text(RecordField.CREATED_MS)),
            updated_ms=int(text(RecordField.UPDATED_MS)),
            attempts=int(text(RecordField.ATTEMPTS)),
            response=response,
            external_id=text(RecordField.EXTERNAL_ID),
            reason=text(RecordField.REASON),
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise StoreCorrupt(f"effect record {key} cannot be decoded: {exc!r}") from exc


def decode_claim(
    key: RecordKey, reply: Any, shortfall: Callable[[], Unreplicated | None]
) -> ClaimResult:
    """The claim script's reply; ``shortfall`` is what the replicas lack of a claim that took
    the key (asked only then)."""
    if int(reply[0]) == 3:
        raise StoreUnavailable(
            "the store's marker is not the one its last check found: it was emptied or"
            " restarted without its data since, so nothing was claimed until it is checked"
        )
    fence = int(reply[1])
    if int(reply[0]) == 1:
        short = shortfall()
        return Claimed(fence, first_attempt_ms=int(reply[2]), unreplicated=short)
    if int(reply[0]) == 2:
        return Paused(decode_pause(*reply[2:6]))
    # A fourth element: this claim turned the lapsed lease unknown.
    return Standing(decode_record(key, reply[2]), lapsed=len(reply) > 3)
