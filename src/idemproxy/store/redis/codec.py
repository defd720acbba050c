"""An effect record from its Redis hash, and a stored response as the scripts take it."""

from __future__ import annotations

from typing import Any

from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.headers import dump_headers, load_headers
from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState, StoredResponse
from idemproxy.store.redis.argv import NO_RESPONSE, ResponseArgs
from idemproxy.store.redis.keys import RecordField


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
