"""An agent's batches without knowing their ids: each with its state, newest first, and which
of them are in error (SPEC 6).

A batch is in error when an effect of it needs someone: an unknown outcome, a failure, or an
attempt whose lease ran out while in flight (its proxy or agent died; the sweep will turn it
unknown). An abandoned batch is never in error: abandoning it was the decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.progress import BatchProgress, RecoveryStrategy
from idemproxy.ledger.recovery import Recovery
from idemproxy.ledger.review import not_found
from idemproxy.store.batches import BatchStart
from idemproxy.store.protocols import Store


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """One batch of an agent: its strategy, how many effects stand where, and since when."""

    batch: str
    strategy: RecoveryStrategy
    started_ms: int
    updated_ms: int  # the newest change of any of its effects
    completed: int
    failed: int
    pending: int
    lapsed: int  # of the pending, those whose lease ran out
    unknown: int
    abandoned: bool
    in_error: bool
    error: str  # why it is in error, "" when it is not


@dataclass(frozen=True, slots=True)
class BatchListing:
    agent: str
    batches: tuple[BatchSummary, ...]  # newest first


def summary(start: BatchStart, progress: BatchProgress, now_ms: int) -> BatchSummary:
    """The batch's progress counted, and judged in error or not at ``now_ms``."""
    actions = (
        progress.completed
        + progress.failed
        + progress.pending
        + progress.unknown
        + progress.compensated
    )
    lapsed = sum(1 for action in progress.pending if action.lease_expires_ms <= now_ms)
    abandoned = progress.abandoned is not None
    causes = [
        (len(progress.unknown), "unknown outcome(s)"),
        (len(progress.failed), "failed"),
        (lapsed, "lapsed in flight"),
    ]
    error = "" if abandoned else ", ".join(f"{n} {what}" for n, what in causes if n)
    return BatchSummary(
        batch=start.batch,
        strategy=progress.strategy,
        started_ms=start.started_ms,
        updated_ms=max((action.updated_ms for action in actions), default=start.started_ms),
        completed=len(progress.completed),
        failed=len(progress.failed),
        pending=len(progress.pending),
        lapsed=lapsed,
        unknown=len(progress.unknown),
        abandoned=abandoned,
        in_error=bool(error),
        error=error,
    )


async def list_batches(store: Store, recovery: Recovery, agent: str, limit: int) -> BatchListing:
    """The agent's newest ``limit`` batches with their state; 404 for an agent never seen."""
    if agent not in await store.list_agents():
        raise not_found(f"agent {agent!r}")
    now_ms = await store.now_ms()
    summaries = []
    for start in await store.list_batches(agent, limit):
        try:
            progress = await recovery.progress(agent, start.batch)
        except RequestRefused as refusal:
            if refusal.code is not ProblemCode.NOT_FOUND:
                raise
            continue  # its last record went since the listing
        if (
            progress.completed
            or progress.failed
            or progress.pending
            or progress.unknown
            or progress.compensated
        ):
            summaries.append(summary(start, progress, now_ms))
    return BatchListing(agent, tuple(summaries))
