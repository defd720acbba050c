"""The audit at the end of a chaos run: the upstream's ledger against the store and the agents.

It checks the promise, "never twice, never lost":

- no effect was applied twice at the upstream;
- every effect an agent asked for has a record that is ``completed``, ``not_applied`` or
  ``unknown`` and then waiting in the review queue; none is left ``in_flight``;
- a ``completed`` record was applied exactly once and holds that application's answer; a
  ``not_applied`` one was never applied; every application has a completed or unknown record;
- every agent that got an answer for an effect got the same one (replays are the original);
- the outbox holds an ``effect.completed`` event for every completed record and an
  ``effect.unknown`` event for every unknown one;
- the recovery controller received every event of the outbox, with a valid signature, each
  agent's in the outbox's order (re-sent ones aside: delivery is at least once).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import orjson

from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectEvent, EventType, RecordKey, RecordState
from tests.support.agents import Answer, Journal, ToolCall, Verdict
from tests.support.fleet import UpstreamLedger

PAGE = 1000


@dataclass
class AuditReport:
    effects: int = 0
    states: Counter[str] = field(default_factory=Counter)
    applied: int = 0
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    redelivered: int = 0  # events the controller got more than once

    def fail(self, message: str) -> None:
        self.violations.append(message)


async def all_events(store: Store, agent: str) -> list[EffectEvent]:
    events: list[EffectEvent] = []
    after: str | None = None
    while page := await store.read_events(agent, after=after, limit=PAGE):
        events += page
        after = page[-1].event_id
    return events


def record_key(answer: Answer) -> RecordKey:
    agent, _, effect_id = answer.effect_key.partition("/")
    return RecordKey(agent, effect_id)


async def audit(
    store: Store, journal: Journal, final: dict[ToolCall, Answer], ledger: UpstreamLedger
) -> AuditReport:
    report = AuditReport(effects=len(final), duplicates=ledger.duplicates())
    report.applied = sum(len(ids) for ids in ledger.applied.values())
    if ledger.bad_signatures:
        report.fail(f"the controller got {ledger.bad_signatures} deliveries with a bad signature")
    for effect, ids in report.duplicates.items():
        report.fail(f"{effect} applied {len(ids)} times at the upstream: {ids}")
    asked = {call.effect for call in final}
    for effect in ledger.applied.keys() - asked:
        report.fail(f"the upstream applied {effect}, which no agent asked for")
    agents = {call.agent for call in final}
    events = {agent: await all_events(store, agent) for agent in agents}
    review = {
        agent: {record.key for record in await store.list_unknown(agent, limit=1_000_000)}
        for agent in agents
    }
    for call, answer in final.items():
        if not answer.effect_key:
            report.fail(f"{call.effect}: the final repeat got no answer naming its key")
            continue
        if answer.verdict not in (Verdict.DONE, Verdict.UNKNOWN):
            report.fail(
                f"{call.effect}: the final repeat ended with {answer.status} {answer.outcome}"
            )
        key = record_key(answer)
        state = await _check_record(report, store, call, key, ledger.applied.get(call.effect, []))
        if state is None:
            continue
        report.states[state] += 1
        _check_answers(report, call, journal.answers.get(call, []), ledger)
        _check_events(report, call, key, state, events[call.agent])
        if state is RecordState.UNKNOWN and key not in review[call.agent]:
            report.fail(f"{call.effect}: unknown but not listed for review")
    for agent, outbox in events.items():
        _check_delivery(report, agent, outbox, ledger.controller.get(agent, []))
    anomalies = Counter(
        f"{answer.status} {answer.outcome}"
        for answers in journal.answers.values()
        for answer in answers
        if answer.verdict is Verdict.ANOMALY
    )
    for answer_text, count in anomalies.items():
        report.fail(f"{count} answers no agent should get: {answer_text}")
    return report


async def _check_record(
    report: AuditReport, store: Store, call: ToolCall, key: RecordKey, applied: list[int]
) -> RecordState | None:
    record = await store.get(key)
    if record is None:
        report.fail(f"{call.effect}: no record under {key} (applied {len(applied)} times)")
        return None
    state = record.state
    if state is RecordState.IN_FLIGHT:
        report.fail(f"{call.effect}: still in flight after the final repeat")
    elif state is RecordState.NOT_APPLIED and applied:
        report.fail(f"{call.effect}: recorded not_applied, but the upstream applied it")
    elif state is RecordState.COMPLETED:
        if len(applied) != 1:
            report.fail(f"{call.effect}: completed, applied {len(applied)} times")
        elif record.response is None or _upstream_id(record.response.body) != applied[0]:
            report.fail(f"{call.effect}: the stored answer is not that of its application")
    return state


def _upstream_id(body: bytes) -> int | None:
    try:
        return int(orjson.loads(body)["id"])
    except (ValueError, KeyError, TypeError):
        return None


def _check_answers(
    report: AuditReport, call: ToolCall, answers: list[Answer], ledger: UpstreamLedger
) -> None:
    ids = {answer.upstream_id for answer in answers if answer.verdict is Verdict.DONE}
    if len(ids) > 1:
        report.fail(f"{call.effect}: agents got different answers {sorted(map(str, ids))}")
    if ids and not ids <= set(ledger.applied.get(call.effect, [])):
        report.fail(f"{call.effect}: an agent got an answer the upstream never gave it")


def _check_delivery(
    report: AuditReport, agent: str, outbox: list[EffectEvent], arrived: list[list[str]]
) -> None:
    """Every event reached the controller; first arrivals came in the outbox's order."""
    first_seen = list(dict.fromkeys(event_id for event_id, _, _ in arrived))
    report.redelivered += len(arrived) - len(first_seen)
    expected = [event.event_id for event in outbox]
    missing = set(expected) - set(first_seen)
    if missing:
        report.fail(f"agent {agent}: {len(missing)} events never reached the controller")
    in_outbox, got = set(expected), set(first_seen)
    order = [event_id for event_id in first_seen if event_id in in_outbox]
    if order != [event_id for event_id in expected if event_id in got]:
        report.fail(f"agent {agent}: the controller got events out of order")


def _check_events(
    report: AuditReport,
    call: ToolCall,
    key: RecordKey,
    state: RecordState,
    events: list[EffectEvent],
) -> None:
    expected = {RecordState.COMPLETED: EventType.COMPLETED, RecordState.UNKNOWN: EventType.UNKNOWN}
    wanted = expected.get(state)
    if wanted is not None and not any(e.key == key and e.type is wanted for e in events):
        report.fail(f"{call.effect}: {state} but the outbox has no {wanted} event for it")
