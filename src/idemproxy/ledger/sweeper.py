"""Housekeeping of the review queue: lapsed leases become unknown, approvals unused in time
expire, the gauges are counted (outcomes awaiting review, approvals awaiting a decision, agents
paused and agents in error, in all and by agent), and agents with nothing left leave the
worklists (store/work.py), so that the sweep and delivery visit only agents with work.

An agent that enters error (ledger/agenterror.py) is logged once by each proxy's sweep, and so
is its leaving it. The sweep visits the agents with records in flight or unknown and the paused
ones: an agent in error only by a failure that replays is shown by ``status`` but not counted.

A proxy that dies holding a request leaves an ``in_flight`` record whose lease runs out. Until
now that was noticed only when the agent repeated the request; the sweep notices it within
``recovery.sweep_interval_s`` so the effect reaches the review queue (and the controller, as
``effect.unknown``) on its own. Each such change is the proxy's own, and is audited
(``effect.lapsed``) right after the sweep wrote it: the store's sweep takes no entry of its own.
``sweep_lapsed`` is that step alone, for the CLI to run on a store no proxy serves.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.ledger.agenterror import AgentError, ErrorReason, agent_error
from idemproxy.metrics import Metrics
from idemproxy.store.approvals import ApprovalState
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectRecord
from idemproxy.store.work import Work

log = logging.getLogger(__name__)

# Counting stops here per agent: the gauge says "at least this many" beyond it.
UNKNOWN_COUNT_CAP = 10_000


async def sweep_lapsed(store: Store, agent: str, swept_by: str = "") -> list[EffectRecord]:
    """Turn the agent's lapsed leases unknown, and log and audit each; returns them."""
    swept = await store.sweep_expired(agent)
    audit = EffectAudit(store)
    for record in swept:
        log.warning(
            "lease lapsed: outcome unknown, awaiting review",
            extra={"effect_key": str(record.key), "batch": record.meta.batch},
        )
        note = f"the lease ran out: its proxy died or lost the store; batch {record.meta.batch!r}"
        if swept_by:
            note += f" (swept by {swept_by})"
        entry = automatic(agent, AutoAction.LAPSED, str(record.key), "in_flight", "unknown", note)
        await audit.write(entry)
    return swept


class Sweeper:
    def __init__(self, store: Store, metrics: Metrics, interval_s: float) -> None:
        self._store = store
        self._metrics = metrics
        self._interval_s = interval_s
        self._paused_labels: set[str] = set()  # agent labels the last sweep counted paused
        self._in_error: dict[str, AgentError] = {}  # as the last sweep found them
        self._error_labels: set[str] = set()  # agent labels the last sweep counted in error

    async def run(self) -> None:
        """Sweep every ``interval_s`` until cancelled; a store outage only delays a sweep."""
        while True:
            try:
                await self.sweep_once()
            except StoreError as exc:
                log.warning("sweep skipped: store unavailable", extra={"reason": str(exc)})
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self._interval_s)

    async def sweep_once(self) -> int:
        """Turn lapsed leases unknown for the agents on the sweep's worklist, then drop the
        agents with nothing left from the worklists; returns how many outcomes await review."""
        waiting = 0
        paused: list[str] = []
        errors: dict[str, AgentError] = {}
        agents = await self._store.list_busy_agents(Work.REVIEW)
        for agent in agents:
            await sweep_lapsed(self._store, agent)
            waiting += len(await self._store.list_unknown(agent, UNKNOWN_COUNT_CAP))
            if (await self._store.read_control(agent)).pause is not None:
                paused.append(agent)
            error = await agent_error(self._store, agent)
            if error is not None:
                errors[agent] = error
        self._metrics.unknown_outcomes.set(waiting)
        self._metrics.agents_paused.set(len(paused))
        self._count_paused(paused)
        self._count_errors(errors, await self._store.now_ms())
        self._metrics.agents_busy.labels(Work.REVIEW).set(len(agents))
        await self._sweep_approvals()
        await self._forget()
        return waiting

    async def _sweep_approvals(self) -> None:
        """Turn approvals unused past their time expired, so the controller hears of it without
        waiting for the agent's repeat, and count the ones awaiting a decision."""
        agents = await self._store.list_busy_agents(Work.APPROVAL)
        awaiting = 0
        for agent in agents:
            for approval in await self._store.expire_approvals(agent):
                self._metrics.approvals.labels(approval.meta.upstream, "expired").inc()
                entry = automatic(
                    agent,
                    AutoAction.APPROVAL_EXPIRED,
                    approval.approval_id,
                    "approved",
                    str(approval.state),
                    f"unused in {approval.valid_ms // 1000} s; found by the sweep",
                )
                await EffectAudit(self._store).write(entry)
            open_ = await self._store.list_approvals(agent, UNKNOWN_COUNT_CAP)
            awaiting += sum(approval.state is ApprovalState.AWAITING for approval in open_)
        self._metrics.approvals_waiting.set(awaiting)
        self._metrics.agents_busy.labels(Work.APPROVAL).set(len(agents))

    def _count_paused(self, paused: list[str]) -> None:
        """``idemproxy_agent_paused`` by agent label; a label no longer paused reads 0."""
        by_label = Counter(self._metrics.agent_label(agent) for agent in paused)
        for label in self._paused_labels - by_label.keys():
            self._metrics.agent_paused.labels(label).set(0)
        for label, count in by_label.items():
            self._metrics.agent_paused.labels(label).set(count)
        self._paused_labels = set(by_label)

    def _count_errors(self, errors: dict[str, AgentError], now_ms: int) -> None:
        """The gauges of agents in error, and a log line for each that entered or left it."""
        for reason in ErrorReason:
            count = sum(error.reason is reason for error in errors.values())
            self._metrics.agents_in_error.labels(reason.value).set(count)
        longest: dict[str, float] = {}
        for agent, error in errors.items():
            label = self._metrics.agent_label(agent)
            seconds = max(0, now_ms - error.since_ms) / 1000
            longest[label] = max(longest.get(label, 0.0), seconds)
            if self._in_error.get(agent) != error:
                log.warning(
                    "agent in error: %s",
                    error.hint,
                    extra={
                        "agent": agent,
                        "reason": error.reason.value,
                        "detail": error.detail,
                        "batch": error.batch,
                        "effect_key": error.effect_key,
                        "strategy": error.strategy.value if error.strategy else "",
                    },
                )
        for agent in self._in_error.keys() - errors.keys():
            log.info("agent no longer in error", extra={"agent": agent})
        for label in self._error_labels - longest.keys():
            self._metrics.agent_error_seconds.labels(label).set(0)
        for label, seconds in longest.items():
            self._metrics.agent_error_seconds.labels(label).set(seconds)
        self._in_error, self._error_labels = errors, set(longest)

    async def _forget(self) -> None:
        forgotten = await self._store.forget_agents()
        if forgotten.over_cap:
            self._metrics.agents_forgotten.inc(forgotten.over_cap)
            log.warning(
                "agent registry full: forgot %d agent id(s) seen longest ago (their records"
                " stay, but `idemproxy status` no longer lists them); so many ids usually mean"
                " an agent that sends a new Idem-Agent id per conversation or per request",
                forgotten.over_cap,
                extra={"forgotten": forgotten.over_cap},
            )
