"""The audit log of operator actions, and the per-agent limit on them that it makes possible.

Every resolution and recovery action writes one entry (who, when, what, before and after) in
the same store step as the change itself. The limit counts an agent's entries of the last
minute, so it holds across proxies and CLIs sharing the store; two actions racing for the last
slot may both pass, which is fine for a brake on runaway automation. The entries the proxy
writes itself (actor ``idemproxy``: an auto-pause, a reconcile, a refusal, the sweep) are no
operator's actions and are not counted; past ``AUTOMATIC_SLACK`` of them among the latest
entries the limit lets an action through rather than read the log without end.
"""

from __future__ import annotations

from enum import StrEnum

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.store.control import AUTO_ACTOR, AUTO_PAUSE_ACTION
from idemproxy.store.protocols import Store

WINDOW_MS = 60_000
AUTOMATIC_SLACK = 1000  # the proxy's own entries read past, at most, to find operators' ones


class AuditAction(StrEnum):
    RESOLVE = "review.resolve"
    RESTART = "recover.restart"
    ABANDON = "recover.abandon"
    RETRY_DELIVERY = "delivery.retry"
    AUTO_PAUSE = AUTO_PAUSE_ACTION  # written by the store in the settle that pauses
    PAUSE = "agent.pause"
    RESUME = "agent.resume"
    RETRY = "review.retry"  # a failed effect freed, alone or by a resume
    COMPENSATE = "recover.compensate"
    ROLLBACK = "recover.rollback"  # the later batches compensated, newest first
    MARK_COMPENSATED = "effect.compensated"  # an effect undone by its compensation
    APPROVE = "approval.approve"  # a held effect may be sent, once
    DENY = "approval.deny"  # a held effect never will be


class ActionLimit:
    """At most ``per_minute`` recovery actions per agent in any minute."""

    def __init__(self, store: Store, per_minute: int) -> None:
        self._store = store
        self._per_minute = per_minute

    async def check(self, agent: str) -> None:
        """Raise ``rate-limited`` (with Retry-After) if the agent used up this minute.

        The window is measured by the store's clock, which stamped the audit entries: this
        host's may differ from it (docs/reliability.md, "One clock per store")."""
        latest = await self._store.read_audit(agent, limit=self._per_minute + AUTOMATIC_SLACK)
        recent = [entry for entry in latest if entry.actor != AUTO_ACTOR][-self._per_minute :]
        if len(recent) < self._per_minute:
            return
        window_start_ms = await self._store.now_ms() - WINDOW_MS
        if len(recent) < self._per_minute or recent[0].ts_ms <= window_start_ms:
            return
        retry_after_s = max(1, -(-(recent[0].ts_ms - window_start_ms) // 1000))
        raise RequestRefused(
            ProblemCode.RATE_LIMITED,
            f"agent {agent!r} had {self._per_minute} recovery actions in the last minute, the"
            f" limit (recovery.actions_per_minute); retry in {retry_after_s} s",
            retry_after_s=retry_after_s,
        )
