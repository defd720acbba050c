"""The review queue: effects whose outcome is unknown, and an operator's decision on each.

A decision is compare-and-set on the record's state: it applies only while the record is still
``unknown``. If it completed meanwhile, or another operator resolved it first, the decision is
refused with the record as it stands, and nothing changes.
"""

from __future__ import annotations

from enum import StrEnum

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger import documents
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EffectRecord,
    RecordKey,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    StoredResponse,
)

# A resolved record must outlive the agent's repeats of it, whatever route TTL it was claimed
# under (one day by default).
RESOLVED_TTL_S = 7 * 86_400


class Decision(StrEnum):
    APPLIED = "applied"
    NOT_APPLIED = "not_applied"

    @classmethod
    def parse(cls, text: str) -> Decision:
        """``applied``, ``not_applied`` or ``not-applied``."""
        try:
            return cls(text.replace("-", "_"))
        except ValueError:
            raise RequestRefused(
                ProblemCode.INVALID_REQUEST,
                f"{text!r} is not a decision: resolve as 'applied' (the effect happened) or"
                " 'not_applied' (it did not; the key is freed)",
            ) from None

    @property
    def state(self) -> RecordState:
        return RecordState.COMPLETED if self is Decision.APPLIED else RecordState.NOT_APPLIED


def parse_key(text: str) -> RecordKey:
    """An effect key as shown in ``Idem-Key`` and the review queue: ``AGENT/EFFECT_ID``."""
    # Effect ids never hold a slash (their parts are percent-encoded); agent ids may.
    agent, sep, effect_id = text.rpartition("/")
    if not sep or not agent or not effect_id:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"{text!r} is not an effect key; copy it from the Idem-Key header or the review"
            " queue, e.g. support-bot/tc:batch-7:call-1:d-0f3a...",
        )
    return RecordKey(agent, effect_id)


def not_found(what: str) -> RequestRefused:
    return RequestRefused(ProblemCode.NOT_FOUND, f"{what} is not in the store (or its TTL passed)")


class Review:
    """List the queue, show an item, resolve one."""

    def __init__(self, store: Store, limit: ActionLimit) -> None:
        self._store = store
        self._limit = limit

    async def queue(self, agent: str | None = None, limit: int = 100) -> list[EffectRecord]:
        """Unknown outcomes of one agent, or of every agent, oldest first."""
        agents = [agent] if agent is not None else await self._store.list_agents()
        waiting = [
            record for name in agents for record in await self._store.list_unknown(name, limit)
        ]
        waiting.sort(key=lambda record: record.updated_ms)
        return waiting[:limit]

    async def item(self, key: RecordKey) -> EffectRecord:
        record = await self._store.get(key)
        if record is None:
            raise not_found(f"effect {key}")
        return record

    async def resolve(
        self,
        key: RecordKey,
        decision: Decision,
        actor: str,
        note: str = "",
        response: StoredResponse | None = None,
        external_id: str = "",
    ) -> EffectRecord:
        """Apply the decision if the record is still unknown; 409 with its state otherwise."""
        await self._limit.check(key.agent)
        reason = f"resolved {decision.value} by {actor}" + (f": {note}" if note else "")
        resolution = Resolution(
            decision.state,
            response=response if decision is Decision.APPLIED else None,
            external_id=external_id,
            reason=reason,
            ttl_s=RESOLVED_TTL_S,
        )
        audit = AuditEntry(
            agent=key.agent,
            action=AuditAction.RESOLVE,
            actor=actor,
            target=str(key),
            before=RecordState.UNKNOWN.value,
            after=decision.state.value,
            note=note,
        )
        result = await self._store.resolve(
            ResolveRequest(key, RecordState.UNKNOWN, resolution, audit)
        )
        if result.record is None:
            raise not_found(f"effect {key}")
        if not isinstance(result, Resolved):
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                f"effect {key} is {result.record.state.value}, not unknown: it was resolved or"
                " completed meanwhile, so this decision changed nothing",
                extra={
                    "state": result.record.state.value,
                    "record": documents.record(result.record),
                },
            )
        return result.record
