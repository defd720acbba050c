"""The listing of an agent's batches (:meth:`Control.list_batches`): which batches it has live
records in, newest first, so an operator or a recovery finds a batch without knowing its id.

A batch is listed by when it started: the first claim of its oldest live record
(``created_ms``, which a freed key claimed again keeps). Records without a batch are in none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from idemproxy.store.records import EffectRecord
from idemproxy.store.retention import MAX_RECORD_TTL_S

# The most batches a listing returns, and the most the Redis store's index of an agent keeps:
# an agent that ran more since its oldest live batch sees only the newest this many.
MAX_LISTED_BATCHES = 1000
# How long the Redis store's index outlives an agent's last claim: a record's TTL starts at its
# outcome, which may come long after the claim, so twice the longest. Listings drop the batches
# whose records are gone before then.
LISTING_RETENTION_S = 2 * MAX_RECORD_TTL_S


@dataclass(frozen=True, slots=True)
class BatchStart:
    """One batch of an agent and when it started, in the store's milliseconds."""

    batch: str
    started_ms: int


def newest_first(starts: Iterable[BatchStart], limit: int) -> list[BatchStart]:
    """``starts`` newest first (ties by batch id, descending, as a Redis sorted set reverses
    them), at most ``limit`` of them and never more than :data:`MAX_LISTED_BATCHES`."""
    ordered = sorted(starts, key=lambda start: (start.started_ms, start.batch), reverse=True)
    return ordered[: max(min(limit, MAX_LISTED_BATCHES), 0)]


def batch_starts(records: Iterable[EffectRecord]) -> list[BatchStart]:
    """Each batch of ``records`` with the earliest ``created_ms`` among them."""
    started: dict[str, int] = {}
    for record in records:
        batch = record.meta.batch
        if batch and (batch not in started or record.created_ms < started[batch]):
            started[batch] = record.created_ms
    return [BatchStart(batch, started_ms) for batch, started_ms in started.items()]
