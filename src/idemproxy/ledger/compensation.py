"""Compensating a batch: undo its completed effects (a refund, a delete), newest first.

``idemproxy recover AGENT BATCH --strategy compensate`` shows the plan: each completed effect,
with the request that undoes it, and what cannot be undone (a route that declares no
compensation, an outcome still unknown). With ``--yes`` each compensation is sent through the
proxy as an effect of its own (ledger/compensator.py); the first failure stops the run.

Nothing is sent, and nothing changes, when the batch has no completed effect, when one of its
effects is being sent right now, or when a route's template does not fit an effect (a policy
mistake is fixed first, not run halfway).

Each effect whose compensation completed is then marked compensated (ledger/compensated.py):
a repeat of it is refused with ``409 effect-compensated`` instead of replaying its "posted".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.ledger.compensated import compensated_by, mark_compensated
from idemproxy.ledger.compensator import (
    Compensator,
    Item,
    Undo,
    UndoState,
    compensation_key,
    is_compensation,
)
from idemproxy.ledger.review import not_found
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectRecord, RecordKey, RecordState

_CANNOT = (UndoState.CANNOT, UndoState.INVALID)


@dataclass(frozen=True, slots=True)
class CompensationPlan:
    """What compensating the batch will do (``confirmed`` False) or did."""

    agent: str
    batch: str
    confirmed: bool
    undo: tuple[Undo, ...]  # newest first: planned, undone, failed
    cannot: tuple[Undo, ...]  # cannot be undone, or the policy's template does not fit
    next_step: str


class Compensations:
    def __init__(self, store: Store, limit: ActionLimit, compensator: Compensator | None) -> None:
        self._store = store
        self._limit = limit
        self._compensator = compensator

    async def plan(self, agent: str, batch: str) -> CompensationPlan:
        items = await self._items(agent, batch)
        return _plan(agent, batch, False, [item.undo for item in items])

    async def run(
        self,
        agent: str,
        batch: str,
        actor: str,
        note: str,
        credentials: Mapping[str, Mapping[str, str]],
    ) -> CompensationPlan:
        """Send every planned compensation, newest first, until one fails."""
        await self._limit.check(agent)
        items = await self._items(agent, batch)
        invalid = [item.undo for item in items if item.undo.state is UndoState.INVALID]
        if invalid:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"nothing was sent: {invalid[0].detail}",
                extra={"invalid": [undo.effect_key for undo in invalid]},
            )
        assert self._compensator is not None
        results = await self._compensator.run(items, credentials)
        await self._mark(results, actor)
        done = _plan(agent, batch, True, results)
        await self._store.append_audit(_audit(agent, batch, actor, note, items, results))
        return done

    async def _mark(self, results: list[Undo], actor: str) -> None:
        """Mark each effect undone (in this run or in one that stopped before marking it)."""
        for undo in results:
            if undo.state is not UndoState.UNDONE:
                continue
            agent, _, effect_id = undo.effect_key.rpartition("/")
            record = await self._store.get(RecordKey(agent, effect_id))
            if record is not None and not compensated_by(record):
                await mark_compensated(self._store, record, undo.compensation_key, actor)

    async def _items(self, agent: str, batch: str) -> list[Item]:
        if self._compensator is None:
            raise RequestRefused(
                ProblemCode.INVALID_REQUEST,
                "compensations are sent through a running proxy, which knows the policies and"
                " the upstreams: use --admin-url (the proxy's admin API), not --store",
            )
        records = await self._store.batch_records(agent, batch)
        if not records:
            what = f"batch {batch!r} of agent {agent!r}"
            raise not_found(what if agent in await self._store.list_agents() else repr(agent))
        _refuse_pending(records)
        originals = [
            record
            for record in records
            if not is_compensation(record)
            and (record.state is RecordState.UNKNOWN or _done(record))
        ]
        if not any(_done(record) for record in originals):
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"batch {batch!r} of agent {agent!r} has no completed effect, so there is"
                " nothing to compensate; nothing was sent",
            )
        originals.sort(key=lambda record: record.updated_ms, reverse=True)
        return [
            self._compensator.plan_item(record, await self._store.get(compensation_key(record)))
            for record in originals
        ]


def _done(record: EffectRecord) -> bool:
    """Completed: still standing, or undone already (then it is listed as undone)."""
    return _succeeded(record) or bool(compensated_by(record))


def _succeeded(record: EffectRecord) -> bool:
    return record.state is RecordState.COMPLETED and not record.failed


def _refuse_pending(records: list[EffectRecord]) -> None:
    pending = [record.meta.tool_call for record in records if record.state is RecordState.IN_FLIGHT]
    if pending:
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"tool call(s) {', '.join(pending)} are being sent right now; wait until they finish,"
            " then compensate; nothing was sent",
        )


def _plan(agent: str, batch: str, confirmed: bool, undos: list[Undo]) -> CompensationPlan:
    undo = tuple(item for item in undos if item.state not in _CANNOT)
    cannot = tuple(item for item in undos if item.state in _CANNOT)
    return CompensationPlan(agent, batch, confirmed, undo, cannot, _next_step(confirmed, undos))


def _next_step(confirmed: bool, undos: list[Undo]) -> str:
    planned = sum(item.state is UndoState.PLANNED for item in undos)
    failed = [item for item in undos if item.state is UndoState.FAILED]
    invalid = [item for item in undos if item.state is UndoState.INVALID]
    if failed:
        stop = failed[0]
        return (
            f"stopped at {stop.effect_key} ({stop.detail}); {planned} compensation(s) not sent."
            " Fix the cause, then run again: done ones replay, and a compensation that failed"
            f" replays its failure until `idemproxy review retry {stop.compensation_key}` frees it"
        )
    if invalid:
        return "fix the policy's compensation of the effects listed as invalid; nothing is sent"
    if planned and not confirmed:
        return f"run again with --yes to send {planned} compensation(s), newest first"
    return "nothing left to undo: every effect that can be undone is"


def _audit(
    agent: str, batch: str, actor: str, note: str, items: list[Item], results: list[Undo]
) -> AuditEntry:
    planned = sum(item.undo.state is UndoState.PLANNED for item in items)
    sent = [
        undo
        for item, undo in zip(items, results, strict=True)
        if item.undo.state is UndoState.PLANNED and undo.state is not UndoState.PLANNED
    ]
    undone = sum(undo.state is UndoState.UNDONE for undo in sent)
    after = f"{undone} undone"
    failed = [undo for undo in sent if undo.state is UndoState.FAILED]
    if failed:
        after += f", stopped at {failed[0].effect_key}: {failed[0].status}"
    return AuditEntry(
        agent, AuditAction.COMPENSATE, actor, batch, f"{planned} to undo", after, note
    )
