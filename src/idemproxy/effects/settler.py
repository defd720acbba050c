"""Settling: the attempt that holds the fence writes its own outcome, whatever comes."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.metrics import Metrics
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import RecordKey, Settlement

log = logging.getLogger(__name__)

_SETTLE_DELAYS_S = (0.05, 0.2, 0.5, 1.0)


class Settler:
    """Writes an attempt's outcome under its fence; counts it toward the agent's pause."""

    def __init__(
        self,
        store: RecordStore,
        metrics: Metrics,
        audit: EffectAudit,
        pause_after_failures: int = 0,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.audit = audit
        self.pause_after_failures = pause_after_failures

    async def settle(
        self,
        ctx: EffectContext,
        fence: int,
        settlement: Settlement,
        *,
        counted: bool = True,
        audit: AuditEntry | None = None,
    ) -> None:
        """Write the outcome, shielded from cancellation and retried through short store blips.

        If the store stays down the record keeps its lease and turns ``unknown`` once that
        runs out: the agent got its answer, and a repeat is never sent blindly. A ``counted``
        outcome of the agent's own effects joins (or ends) its failure streak. ``audit`` is
        written once the settle is, for an outcome the proxy decided itself (a read-back's);
        a settle refused because the fence moved is audited as such.
        """
        key = ctx.key.record_key
        if counted and not ctx.operator and self.pause_after_failures:
            settlement = dataclasses.replace(
                settlement, pause_after_failures=self.pause_after_failures
            )
        for delay_s in (*_SETTLE_DELAYS_S, None):
            try:
                held = await asyncio.shield(self.store.settle(key, fence, settlement))
            except StoreError:
                if delay_s is None:
                    log.error("could not record outcome", extra={"effect_key": str(key)})
                    return
                await asyncio.sleep(delay_s)
                continue
            if not held:
                self.metrics.fenced_writes.inc()
                log.warning("late write dropped: lease lost", extra={"effect_key": str(key)})
                await self._refused(key, fence, settlement)
                return
            if audit is not None:
                await self.audit.write(audit)
            if counted and not ctx.operator and settlement.failure() is not None:
                label = self.metrics.agent_label(key.agent)
                self.metrics.agent_failed_effects.labels(label).inc()
            return

    async def _refused(self, key: RecordKey, fence: int, settlement: Settlement) -> None:
        """Audit the outcome the store refused: what the attempt learned, and what stands."""
        try:
            standing = await self.store.get(key)
        except StoreError:
            standing = None
        before = str(standing.state) if standing is not None else "no record"
        after = f"{settlement.state} at fence {fence} not written: the fence moved"
        note = settlement.reason or "the attempt's lease was lost or the outcome resolved"
        entry = automatic(key.agent, AutoAction.LATE_SETTLE_REFUSED, str(key), before, after, note)
        await self.audit.write(entry)
