"""The body of a delivery: one agent's effect events, oldest first.

::

    {"agent": "support-bot", "events": [{"event_id": "00000000000000000007",
      "type": "effect.completed", "agent": "support-bot", "effect_key": "support-bot/tc:...",
      "effect_id": "tc:...", "batch": "...", "tool_call": "...", "action": "post_message",
      "upstream": "slack", "method": "POST", "path": "/api/chat.postMessage", "status": 200,
      "external_id": "...", "reason": "", "state": "completed", "ts_ms": 1796050237123}, ...]}

A delivery may come more than once (it is sent again when the answer to it was lost), so a
controller deduplicates by ``(agent, event_id)``; ids of one agent grow in the order the
events happened and compare as text. Fields a newer proxy adds are kept in ``Event.extra``
instead of failing the parse, and so is a type this version does not know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


class EventType(StrEnum):
    """What happened to an effect record, or to its agent. ``Event.type`` is a plain string
    equal to one of these, or a type a newer proxy sends."""

    COMPLETED = "effect.completed"  # the upstream answered; the answer is recorded
    FAILED = "effect.failed"  # recorded with an error status; a repeat replays it
    UNKNOWN = "effect.unknown"  # it may or may not have happened: it waits for review
    NOT_APPLIED = "effect.not_applied"  # certainly not applied; a repeat is sent again
    REPLAYED = "effect.replayed"  # a repeat got the recorded answer
    RESOLVED = "effect.resolved"  # an operator's verdict on an unknown outcome
    # Of an effect held for approval before it is sent; ``extra["approval_id"]`` names it.
    APPROVAL_REQUESTED = "effect.approval_requested"  # held: nothing sent yet
    APPROVED = "effect.approved"  # an operator approved it: its next attempt is sent once
    DENIED = "effect.denied"  # an operator denied it: never sent (``reason`` is the note)
    APPROVAL_EXPIRED = "effect.approval_expired"  # approved, but not used in time
    # Of the agent: ``effect_key`` is the effect that caused it, "" when none did.
    AGENT_ERROR = "agent.error"  # an effect turned unknown: the agent waits for a decision
    AGENT_PAUSED = "agent.paused"  # automatically after failures in a row, or by an operator
    AGENT_RESUMED = "agent.resumed"
    BATCH_ABANDONED = "batch.abandoned"  # an operator archived the batch (``batch`` names it)


class MalformedDelivery(ValueError):
    """The body is not a delivery document: say so to the sender (400), do not store it."""


@dataclass(frozen=True, slots=True)
class Event:
    """One state change of one effect record."""

    event_id: str
    type: str
    agent: str
    effect_key: str  # what the agent saw in ``Idem-Key``, and what ``idemproxy review`` takes
    effect_id: str
    batch: str
    tool_call: str
    action: str  # the policy route's name, or the agent's Idem-Action
    upstream: str
    method: str
    path: str
    status: int  # the upstream's HTTP status; 0 when none was recorded
    external_id: str  # e.g. the message id or charge id the route's ``external_id`` names
    reason: str
    state: str  # the record's state after the change
    ts_ms: int
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def known_type(self) -> EventType | None:
        """The type as an :class:`EventType`, or None for one this version does not know."""
        try:
            return EventType(self.type)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One POST: an agent's events in the order they happened."""

    agent: str
    events: tuple[Event, ...]


_NUMBER_FIELDS = ("status", "ts_ms")
_TEXT_FIELDS = tuple(f.name for f in fields(Event) if f.name not in {*_NUMBER_FIELDS, "extra"})


def parse_delivery(body: bytes) -> Delivery:
    """The delivery in ``body`` (verify its signature first); :class:`MalformedDelivery` if
    it is not one."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedDelivery(f"the body is not JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("events"), list):
        raise MalformedDelivery('a delivery is {"agent": ..., "events": [...]}')
    agent = document.get("agent")
    if not isinstance(agent, str):
        raise MalformedDelivery("the delivery names no agent")
    events = tuple(parse_event(item) for item in document["events"])
    return Delivery(agent, events)


def parse_event(item: object) -> Event:
    """One event document; :class:`MalformedDelivery` if a field is missing or mistyped."""
    if not isinstance(item, dict):
        raise MalformedDelivery(f"an event is a JSON object, not {type(item).__name__}")
    values: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        values[name] = _typed(item, name, str)
    for name in _NUMBER_FIELDS:
        values[name] = _typed(item, name, int)
    known = {*_TEXT_FIELDS, *_NUMBER_FIELDS}
    extra = {key: value for key, value in item.items() if key not in known}
    return Event(**values, extra=extra)


def _typed(item: Mapping[str, Any], name: str, kind: type) -> Any:
    value = item.get(name)
    # bool is an int to Python, not to JSON's producers.
    if not isinstance(value, kind) or isinstance(value, bool):
        event_id = item.get("event_id", "?")
        raise MalformedDelivery(f"event {event_id}: {name!r} must be a {kind.__name__}")
    return value
