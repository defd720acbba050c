"""A batch's archive of outcomes: what each of its effects came to, kept past the records.

A record lives its route's ``ttl_s`` once it has an outcome; after that the store forgets it.
So that an operator (``batch-status``) and the agent can still learn what a batch did, every
store writes, in the same step as the settle or resolve that starts a record's TTL, the
record's outcome into its batch's archive of outcomes: one entry per effect id, overwritten by
a later outcome of the same key and kept ``Retention.archive_s`` (at least) from its writing.
The entry holds what the batch progress shows, never the response body or headers: the
archive explains an effect, it cannot replay it. Records that are held (in flight, unknown)
never expire, so they are not archived; a freed record a recovery clears leaves the archive
with it.

The entry is a JSON object of the :class:`ArchivedOutcome` fields, written by Python for the
memory and SQLite stores and by the Lua scripts for Redis (numbers there may come as strings).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import orjson

from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import EffectRecord, RecordState

# The states that start a record's TTL, and so leave an outcome in the archive.
ARCHIVED_STATES = frozenset({RecordState.COMPLETED, RecordState.NOT_APPLIED})


@dataclass(frozen=True, slots=True)
class ArchivedOutcome:
    """An effect's outcome as the archive keeps it."""

    effect_id: str
    batch: str
    tool_call: str
    action: str
    upstream: str
    method: str
    path: str
    state: RecordState
    status: int  # 0: no response
    external_id: str
    reason: str
    attempts: int
    created_ms: int
    updated_ms: int


def archived_outcome(record: EffectRecord) -> ArchivedOutcome:
    meta = record.meta
    return ArchivedOutcome(
        effect_id=record.key.effect_id,
        batch=meta.batch,
        tool_call=meta.tool_call,
        action=meta.action,
        upstream=meta.upstream,
        method=meta.method,
        path=meta.path,
        state=record.state,
        status=record.status,
        external_id=record.external_id,
        reason=record.reason,
        attempts=record.attempts,
        created_ms=record.created_ms,
        updated_ms=record.updated_ms,
    )


def encode_outcome(outcome: ArchivedOutcome) -> bytes:
    return orjson.dumps(asdict(outcome))


_NUMBERS = ("status", "attempts", "created_ms", "updated_ms")


def decode_outcome(data: bytes | str) -> ArchivedOutcome:
    """An entry as :func:`encode_outcome` or the Redis scripts wrote it."""
    try:
        fields = orjson.loads(data)
        values = {name: fields[name] for name in ArchivedOutcome.__dataclass_fields__}
        values["state"] = RecordState(values["state"])
        values.update({name: int(values[name]) for name in _NUMBERS})
        return ArchivedOutcome(**values)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise StoreCorrupt(f"archived outcome {data[:80]!r}: {exc}") from exc


def in_order(outcomes: list[ArchivedOutcome]) -> list[ArchivedOutcome]:
    """Oldest claim first, as the batch's records are listed."""
    return sorted(outcomes, key=lambda outcome: (outcome.created_ms, outcome.effect_id))
