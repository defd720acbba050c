"""Rolling an agent back to a batch: undo every later batch of it, newest first.

``idemproxy recover AGENT --rollback-to BATCH`` leaves the agent where BATCH ended: each batch
the agent started after it (by the store's listing, ``list_batches``) is compensated in turn,
newest first, through the compensation machinery (ledger/compensation.py): each of its completed
effects is undone and marked compensated, so a repeat of one gets ``409 effect-compensated``
and batch progress lists it. BATCH itself, and everything before it, stays as it is.

Without ``--yes`` nothing is sent: the plan lists each later batch with what compensating it
would undo, and what no compensation can (a route that declares none: those effects stay, and
the next step says so). A later batch with an unknown outcome refuses the rollback before
anything is sent. A confirmed run stops at the first compensation that fails: the batches
before it in the run are undone, that one and the older ones are left, and the next step says
what to fix. Running it again replays what was undone and goes on. Like any compensation it
needs a running proxy (its policies and listener).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger import documents
from idemproxy.ledger.audit import AuditAction
from idemproxy.ledger.compensated import compensated_by
from idemproxy.ledger.compensation import CompensationPlan, Compensations
from idemproxy.ledger.compensator import UndoState, is_compensation
from idemproxy.ledger.documents import Document
from idemproxy.ledger.freeing import succeeded
from idemproxy.ledger.review import not_found
from idemproxy.store.batches import MAX_LISTED_BATCHES
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState

Credentials = Mapping[str, Mapping[str, str]]  # per upstream, headers for its compensations


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    """What rolling back to ``target`` will undo (``confirmed`` False) or undid."""

    agent: str
    target: str
    confirmed: bool
    batches: tuple[CompensationPlan, ...]  # the later batches, newest first
    undone: tuple[str, ...]  # batches whose every effect that can be undone is
    cannot: tuple[str, ...]  # effect keys no compensation can undo: left as they are
    next_step: str


class RollbackVerb:
    """``rollback`` of :class:`~idemproxy.ledger.service.LedgerService`, kept beside what it
    runs."""

    _rollbacks: Rollbacks

    async def rollback(
        self, agent: str, target: str, actor: str, note: str, credentials: Credentials | None
    ) -> Document:
        """The plan to undo the batches after ``target``; with credentials, undo them."""
        plan = await self._rollbacks.answer(agent, target, actor, note, credentials)
        return documents.value(plan)


class Rollbacks:
    def __init__(self, store: Store, compensations: Compensations) -> None:
        self._store = store
        self._compensations = compensations

    async def answer(
        self, agent: str, target: str, actor: str, note: str, credentials: Credentials | None
    ) -> RollbackPlan:
        """Without credentials the plan, with them the run."""
        if credentials is None:
            return await self.plan(agent, target)
        return await self.run(agent, target, actor, note, credentials)

    async def plan(self, agent: str, target: str) -> RollbackPlan:
        later = await self._later(agent, target)
        plans = [await self._compensations.plan(agent, batch) for batch in later]
        return _rollback(agent, target, False, plans)

    async def run(
        self,
        agent: str,
        target: str,
        actor: str,
        note: str,
        credentials: Credentials,
    ) -> RollbackPlan:
        """Compensate the later batches, newest first, until one fails or cannot be undone."""
        later = await self._later(agent, target)
        plans: list[CompensationPlan] = []
        for batch in later:
            plan = await self._compensations.run(agent, batch, actor, note, credentials)
            plans.append(plan)
            if not _undone(plan):
                break
        done = _rollback(agent, target, True, plans)
        stopped = "" if len(plans) == len(later) else f", stopped at {plans[-1].batch}"
        await self._store.append_audit(
            AuditEntry(
                agent,
                AuditAction.ROLLBACK,
                actor,
                target,
                f"{len(later)} later batch(es): {', '.join(later) or '-'}",
                f"{len(done.undone)} undone{stopped}",
                note,
            )
        )
        return done

    async def _later(self, agent: str, target: str) -> list[str]:
        """The agent's batches started after ``target`` that did an effect, newest first."""
        listed = await self._store.list_batches(agent, MAX_LISTED_BATCHES)
        names = [start.batch for start in listed]
        if target not in names:
            raise not_found(
                f"batch {target!r} of agent {agent!r}"
                if agent in await self._store.list_agents()
                else repr(agent)
            )
        later = names[: names.index(target)]
        if not later:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"batch {target!r} is agent {agent!r}'s latest: no later batch to undo, so"
                " nothing was sent",
            )
        return [batch for batch in later if await _acted(self._store, agent, batch)]


async def _acted(store: Store, agent: str, batch: str) -> bool:
    """Whether the batch has an effect to undo; refused while one's outcome is unknown. A batch
    of failures alone has nothing to undo, and one may stay listed briefly once its records
    expired (store/batches.py)."""
    records = [r for r in await store.batch_records(agent, batch) if not is_compensation(r)]
    unknown = [str(record.key) for record in records if record.state is RecordState.UNKNOWN]
    if unknown:
        raise RequestRefused(
            ProblemCode.STATE_CONFLICT,
            f"batch {batch!r} has {len(unknown)} effect(s) whose outcome is unknown, so it cannot"
            " be undone: resolve each with `idemproxy review resolve KEY` first; nothing was sent",
            extra={"review": unknown},
        )
    return any(succeeded(record) or compensated_by(record) for record in records)


def _undone(plan: CompensationPlan) -> bool:
    """Every effect of the batch that can be undone is (those that cannot are listed)."""
    return all(undo.state is UndoState.UNDONE for undo in plan.undo)


def _rollback(
    agent: str, target: str, confirmed: bool, plans: list[CompensationPlan]
) -> RollbackPlan:
    undone = tuple(plan.batch for plan in plans if _undone(plan))
    cannot = tuple(undo.effect_key for plan in plans for undo in plan.cannot)
    step = _next_step(target, confirmed, plans, cannot)
    return RollbackPlan(agent, target, confirmed, tuple(plans), undone, cannot, step)


def _next_step(
    target: str, confirmed: bool, plans: list[CompensationPlan], cannot: tuple[str, ...]
) -> str:
    stuck = [plan for plan in plans if not _undone(plan)]
    left = (
        f"; {len(cannot)} effect(s) cannot be undone (listed under cannot): undo them by hand"
        if cannot
        else ""
    )
    if confirmed and stuck:
        return f"stopped at batch {stuck[0].batch}: {stuck[0].next_step}{left}"
    if confirmed:
        return (
            f"the agent resumes from the end of batch {target}: start its next batch; a repeat"
            f" of an undone effect is refused (409 effect-compensated){left}"
        )
    return f"run again with --yes to undo {len(plans)} batch(es), newest first{left}"
