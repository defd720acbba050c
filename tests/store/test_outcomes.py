"""An archived outcome: what a record keeps past its TTL, and its encoding on every backend."""

from __future__ import annotations

import orjson
import pytest

from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.outcomes import (
    ARCHIVED_STATES,
    archived_outcome,
    decode_outcome,
    encode_outcome,
    in_order,
)
from idemproxy.store.records import EffectMeta, EffectRecord, RecordKey, RecordState, StoredResponse


def record(effect_id: str = "e", created_ms: int = 10) -> EffectRecord:
    return EffectRecord(
        key=RecordKey("a", effect_id),
        state=RecordState.COMPLETED,
        fence=3,
        fingerprint="fp",
        meta=EffectMeta("b", "call-1", "post", "discord", "POST", "/m"),
        created_ms=created_ms,
        updated_ms=20,
        attempts=2,
        response=StoredResponse(201, (("x-secret-ish", "v"),), b"the body"),
        external_id="m-1",
    )


def test_an_outcome_keeps_what_progress_shows_and_never_the_response() -> None:
    outcome = archived_outcome(record())
    assert (outcome.effect_id, outcome.batch, outcome.tool_call) == ("e", "b", "call-1")
    assert (outcome.status, outcome.external_id, outcome.attempts) == (201, "m-1", 2)
    encoded = encode_outcome(outcome)
    assert b"the body" not in encoded
    assert b"x-secret-ish" not in encoded
    assert decode_outcome(encoded) == outcome


def test_the_redis_scripts_numbers_as_strings_decode_the_same() -> None:
    fields = orjson.loads(encode_outcome(archived_outcome(record())))
    as_lua = {
        name: str(value) if isinstance(value, int) else value for name, value in fields.items()
    }
    assert decode_outcome(orjson.dumps(as_lua)) == archived_outcome(record())


@pytest.mark.parametrize("data", [b"not json", b"{}", b'{"state": "gone"}'])
def test_a_damaged_entry_is_reported_as_corrupt(data: bytes) -> None:
    with pytest.raises(StoreCorrupt, match="archived outcome"):
        decode_outcome(data)


def test_only_outcomes_that_start_a_ttl_are_archived_and_they_list_oldest_first() -> None:
    assert {RecordState.COMPLETED, RecordState.NOT_APPLIED} == ARCHIVED_STATES
    late, early = archived_outcome(record("z", 5)), archived_outcome(record("y", 9))
    assert in_order([early, late]) == [late, early]
