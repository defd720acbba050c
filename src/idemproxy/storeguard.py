"""Effects only on a store that keeps them: the proxy's side of store/safety.py.

The guard checks the store at start-up, in ``/readyz`` and every
``store_safety.check_interval_s`` (:meth:`StoreGuard.watch`, a task of its own): its
durability against the settings (idemproxy/storerisks.py), the evictions Redis counted since
the last check, and the marker. Between checks the verdict is held in memory, so an effect
pays no store call for it; a request that found the store failing makes the next one check
first, since a store that comes back may have come back empty.

    unchecked     no check has succeeded yet: the next effect checks first
    ready         effects go ahead (warnings are logged and shown in /readyz)
    unsafe        the store may lose records: 503 store-unsafe until it is fixed
    records-lost  it lost records: 503 store-records-lost until an operator acknowledges it

A store changed between two checks is found at the second: a repeat reaching the proxy in
between, on a store that just forgot it, is not (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from enum import StrEnum

from idemproxy.config.settings import StoreSafetyConfig
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.metrics import Metrics
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import Store
from idemproxy.store.safety import Durability, Loss, LossKind, Marker
from idemproxy.storerisks import Finding, Risk, findings

log = logging.getLogger(__name__)

ACKNOWLEDGE = "idemproxy store acknowledge-loss"


class SafetyStatus(StrEnum):
    UNCHECKED = "unchecked"
    READY = "ready"
    UNSAFE = "unsafe"
    RECORDS_LOST = "records-lost"


@dataclass(frozen=True, slots=True)
class StoreVerdict:
    """What the last check found; ``reason`` says why effects are refused, if they are."""

    status: SafetyStatus
    reason: str = ""
    warnings: tuple[str, ...] = ()
    durability: Durability | None = None
    marker: Marker | None = None
    loss: Loss | None = None


def lost_reason(loss: Loss) -> str:
    return (
        f"the store lost records ({loss.reason}). A repeat of an effect it forgot would be sent"
        " again, so effectful routes send nothing until an operator has checked what those"
        f" effects did and runs `{ACKNOWLEDGE} --note ...`"
    )


class StoreGuard:
    """The verdict on one store, kept by one proxy process (each worker keeps its own)."""

    def __init__(
        self,
        store: Store,
        settings: StoreSafetyConfig,
        metrics: Metrics | None = None,
        *,
        reports: bool = True,
    ) -> None:
        """``reports``: log what the checks find (a proxy does; a CLI command shows it)."""
        self._store = store
        self._settings = settings
        self._metrics = metrics
        self._reports = reports
        self._verdict = StoreVerdict(SafetyStatus.UNCHECKED)
        self._seen: Marker | None = None
        self._evictions: tuple[str, int] | None = None  # server id and count at the last check
        self._checking: asyncio.Future[StoreVerdict] | None = None
        self._stale = False

    @property
    def verdict(self) -> StoreVerdict:
        return self._verdict

    @property
    def admits(self) -> bool:
        """Effects may go ahead on what the last check found, without asking the store."""
        return self._verdict.status is SafetyStatus.READY and not self._stale

    def suspect(self) -> None:
        """The store failed under a request: the next effect checks it first."""
        self._stale = True

    async def admit(self) -> None:
        """Raise the refusal an effect gets on this store now; checks first if need be (and
        raises :class:`StoreError` when the store does not answer a first check)."""
        verdict = self._verdict
        if verdict.status is SafetyStatus.UNCHECKED or self._stale:
            try:
                verdict = await self.check()
            except StoreError:
                if verdict.status is not SafetyStatus.READY:
                    raise
                # Still failing: the effect's own claim says whether its part of the store
                # answers (on Redis Cluster another master than the marker's may well).
        if verdict.status is SafetyStatus.UNSAFE:
            raise RequestRefused(
                ProblemCode.STORE_UNSAFE,
                f"nothing was sent: {verdict.reason}",
                extra={"store": verdict.status.value},
            )
        if verdict.status is SafetyStatus.RECORDS_LOST:
            raise RequestRefused(
                ProblemCode.STORE_RECORDS_LOST,
                f"nothing was sent: {verdict.reason}",
                extra={"store": verdict.status.value},
            )

    async def check(self) -> StoreVerdict:
        """Check the store now; callers that come while a check runs share it."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check())
        return await asyncio.shield(self._checking)

    async def watch(self, interval_s: float) -> None:
        """Check every ``interval_s`` until cancelled; a store outage only delays a check."""
        while True:
            try:
                await self.check()
            except StoreError as exc:
                self._stale = True
                log.warning("store check skipped: store unavailable", extra={"reason": str(exc)})
            except Exception:
                log.exception("store check failed")
            await asyncio.sleep(interval_s)

    async def _check(self) -> StoreVerdict:
        durability = await self._store.durability()
        risks = findings(durability, self._settings, self._store.backend)
        await self._count_evictions(durability)
        found = await self._store.check_marker(self._seen)
        if found.loss is None:
            self._seen = found.marker
            if found.created and self._reports and await self._store.list_agents():
                log.warning(
                    "marked a store that already holds records: it was written before stores"
                    " were marked, or lost its marker and log together, which a loss of"
                    " records would look like too; if the store was restored or emptied"
                    " lately, check its effects at the upstreams"
                )
        # While a loss stands the claims still compare the marker last seen, which the emptied
        # store lacks: a request already past this guard (waiting on an attempt in flight) that
        # claims again must not take its key on the empty store and send the effect twice.
        self._store.expect_marker(self._seen)
        verdict = _verdict(risks, found.loss)
        verdict = dataclasses.replace(verdict, durability=durability, marker=found.marker)
        self._publish(verdict, risks)
        self._stale = False
        return verdict

    async def _count_evictions(self, durability: Durability) -> None:
        """Evictions since the last check lose records the settings did not allow to lose."""
        if durability.evicted_keys is None:
            return
        now = (durability.server_id, durability.evicted_keys)
        before = self._evictions
        # Not a first count, nor one of a server restarted since (the marker answers for that).
        if before is not None and before[0] == now[0] and now[1] > before[1]:
            evicted = f"{now[1] - before[1]} keys between two checks"
            if not self._settings.allow_eviction:
                await self._store.record_loss(LossKind.EVICTED, evicted)
            elif self._reports:
                log.warning(
                    "Redis evicted keys, and records may be among them: repeats of those"
                    " effects will be sent again (store_safety.allow_eviction is true)",
                    extra={"evicted": evicted},
                )
        self._evictions = now  # once the loss is written: a failed write counts again

    def _publish(self, verdict: StoreVerdict, risks: list[Finding]) -> None:
        before = self._verdict
        self._verdict = verdict
        if self._metrics is not None:
            self._metrics.store_records_lost.set(verdict.loss is not None)
            present = {finding.risk for finding in risks}
            for risk in Risk:
                self._metrics.store_risk.labels(risk.value).set(risk in present)
        if not self._reports:
            return
        if (verdict.status, verdict.reason) != (before.status, before.reason):
            _log_change(before, verdict)
        for warning in verdict.warnings:
            if warning not in before.warnings:
                log.warning("the store could lose records", extra={"reason": warning})


def _verdict(risks: list[Finding], loss: Loss | None) -> StoreVerdict:
    warnings = tuple(finding.message for finding in risks if not finding.blocks)
    if loss is not None:
        return StoreVerdict(SafetyStatus.RECORDS_LOST, lost_reason(loss), warnings, loss=loss)
    blocking = [finding.message for finding in risks if finding.blocks]
    if blocking:
        reason = "; ".join(blocking)
        return StoreVerdict(SafetyStatus.UNSAFE, reason, warnings)
    return StoreVerdict(SafetyStatus.READY, warnings=warnings)


def _log_change(before: StoreVerdict, now: StoreVerdict) -> None:
    if now.status is SafetyStatus.RECORDS_LOST:
        log.error("the store lost records: effects are refused", extra={"reason": now.reason})
    elif now.status is SafetyStatus.UNSAFE:
        log.error("the store can lose records: effects are refused", extra={"reason": now.reason})
    elif before.status is SafetyStatus.UNCHECKED:
        durability = now.durability
        log.info(
            "store checked: effects go ahead",
            extra={
                "eviction_policy": durability.eviction_policy if durability else None,
                "persistence": durability.persistence if durability else None,
            },
        )
    else:
        log.info("the store is safe again: effects go ahead")
