"""An agent's error, derived from the store: paused, an unknown outcome, or a failure that
replays; each cleared by the recovery that answers it."""

from __future__ import annotations

from idemproxy.ledger.agenterror import AgentError, ErrorReason, agent_error, error_document
from idemproxy.ledger.progress import RecoveryStrategy
from idemproxy.store.control import Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Resolution,
    ResolveRequest,
    Settlement,
    StoredResponse,
)
from tests.ledger.conftest import make_effect

DENIED = StoredResponse(401, (), b"{}")


async def counted(store: Store, agent: str, call: str, status: int, limit: int = 5) -> RecordKey:
    """An effect of batch ``b1`` settled with ``status``, counted in the failure streak."""
    key = RecordKey(agent, f"tc:b1:{call}:d-0")
    meta = EffectMeta("b1", call, "post_message", "discord", "POST", "/m")
    claim = await store.claim(ClaimRequest(key, "fp", meta, 30_000, 600))
    assert isinstance(claim, Claimed)
    response = StoredResponse(status, (), b"{}")
    settlement = Settlement(RecordState.COMPLETED, response, pause_after_failures=limit)
    assert await store.settle(key, claim.fence, settlement)
    return key


def audit(agent: str, action: str) -> AuditEntry:
    return AuditEntry(agent=agent, action=action, actor="alice", target=agent)


async def test_an_agent_whose_effects_went_well_is_not_in_error(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    assert await agent_error(store, ns) is None


async def test_an_unknown_outcome_is_an_error_until_resolved(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    key = await make_effect(store, ns, "b1", "c2", RecordState.UNKNOWN)
    record = await store.get(key)
    assert record is not None

    error = await agent_error(store, ns)

    assert error == AgentError(
        agent=ns,
        reason=ErrorReason.UNKNOWN_OUTCOME,
        detail="no answer",
        batch="b1",
        effect_key=str(key),
        since_ms=record.updated_ms,
        strategy=RecoveryStrategy.MANUAL_ONLY,
        hint=error.hint if error else "",
    )
    assert f"idemproxy review resolve {key}" in error.hint
    resolution = Resolution(RecordState.NOT_APPLIED)
    await store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution, audit(ns, "r")))
    assert await agent_error(store, ns) is None


async def test_a_failure_that_replays_is_an_error_until_freed(store: Store, ns: str) -> None:
    await counted(store, ns, "c1", 200)
    first = await counted(store, ns, "c2", 401)
    await counted(store, ns, "c3", 403)
    record = await store.get(first)
    assert record is not None

    error = await agent_error(store, ns)

    assert error is not None
    assert (error.reason, error.batch, error.effect_key) == (ErrorReason.FAILED, "b1", str(first))
    assert (error.detail, error.since_ms) == ("upstream answered 401", record.updated_ms)
    assert error.strategy is RecoveryStrategy.SELECTIVE  # c1 completed: a re-run replays it
    assert f"idemproxy review retry {first}" in error.hint
    # Freed (``review retry``), it no longer replays: the next failure of the streak stands.
    freed = Resolution(RecordState.NOT_APPLIED)
    await store.resolve(ResolveRequest(first, RecordState.COMPLETED, freed, None, record.fence))
    error = await agent_error(store, ns)
    assert error is not None
    assert error.effect_key == f"{ns}/tc:b1:c3:d-0"
    # A success ends the streak, and the error with it.
    await counted(store, ns, "c4", 201)
    assert await agent_error(store, ns) is None


async def test_a_pause_comes_first_and_a_resume_clears_it(store: Store, ns: str) -> None:
    await make_effect(store, ns, "b1", "c1", RecordState.UNKNOWN)
    pause = Pause(PauseOrigin.OPERATOR, "deploy in progress", "alice")
    written = await store.write_pause(PauseRequest(ns, 0, pause, audit(ns, "p")))
    assert written is not None
    assert written.pause is not None

    error = await agent_error(store, ns)

    assert error is not None
    assert (error.reason, error.detail) == (ErrorReason.PAUSED, "deploy in progress")
    assert (error.batch, error.effect_key, error.strategy) == ("", "", None)
    assert error.since_ms == written.pause.since_ms
    assert f"idemproxy agent resume {ns}" in error.hint
    await store.write_pause(PauseRequest(ns, written.version, None, audit(ns, "r")))
    error = await agent_error(store, ns)
    assert error is not None
    assert error.reason is ErrorReason.UNKNOWN_OUTCOME  # still waiting for review


async def test_an_automatic_pause_names_the_batch_of_its_last_failure(
    store: Store, ns: str
) -> None:
    for call in ("c1", "c2"):
        last = await counted(store, ns, call, 401, limit=2)

    error = await agent_error(store, ns)

    assert error is not None
    assert (error.reason, error.batch, error.effect_key) == (ErrorReason.PAUSED, "b1", str(last))
    assert error.detail.startswith("auto-paused after 2 consecutive failures")
    assert error.strategy is RecoveryStrategy.RESTART_BATCH


def test_the_document_says_how_long_the_error_has_lasted() -> None:
    error = AgentError(
        "a", ErrorReason.FAILED, "upstream answered 401", "b1", "a/k", 1_000, None, "retry"
    )
    assert error_document(None, 5_000) is None
    assert error_document(error, 3_500) == {
        "reason": "failed",
        "detail": "upstream answered 401",
        "batch": "b1",
        "effect_key": "a/k",
        "since_ms": 1_000,
        "strategy": None,
        "hint": "retry",
        "seconds": 2.5,
    }
