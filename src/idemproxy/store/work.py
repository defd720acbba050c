"""The agents the background loops visit: those with work, not every agent the store ever saw.

Agent ids come from a request header, so a store may have seen millions of them; the sweep and
delivery pass over every agent they visit every few seconds. Each store therefore keeps, per
kind of :class:`Work`, a worklist: every agent that has such work is on it (an agent is listed
before the step that gives it work, or in that same step), and one with none left stays on it
until :meth:`~idemproxy.store.protocols.Control.forget_agents` finds it idle and drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Work(StrEnum):
    """What a background loop visits an agent for."""

    # The sweep: records in flight (their lease may lapse) or awaiting review, or a pause.
    REVIEW = "review"
    # Delivery: events after the agent's cursor, or records in flight or awaiting review, each
    # of which will emit an event when it settles or is resolved.
    DELIVERY = "delivery"
    # The console and the sweep: approvals awaiting a decision or a use (store/approvals.py).
    APPROVAL = "approval"


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What one :meth:`~idemproxy.store.protocols.Control.forget_agents` dropped."""

    idle: int = 0  # worklist entries of agents with no such work left
    over_cap: int = 0  # registry entries of the least recently seen agents, past its cap
