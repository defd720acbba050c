"""What a restarted agent reads about its batch before it re-runs it: its recovery context,
asked of the proxy listener with ``idemproxy.agent.recovery_context``, as the agent would."""

from __future__ import annotations

from dataclasses import dataclass

from idemproxy import agent
from idemproxy.integrations.steps import GENERATIONS
from tests.support.processes import ServedProxy


@dataclass(frozen=True)
class RecoveryContext:
    # The model's tool calls whose effects completed, in the batch's order; generations apart.
    completed_tool_calls: list[str]
    completed_generations: int
    context: agent.RecoveryContext


def read_recovery_context(proxy: ServedProxy, agent_id: str, batch: str) -> RecoveryContext:
    found = agent.recovery_context(batch, base_url=proxy.url, agent=agent_id)
    assert found is not None, f"the proxy has no record of batch {batch!r}"
    completed = [action["tool_call"] for action in found.completed]
    return RecoveryContext(
        completed_tool_calls=[call for call in completed if call != GENERATIONS],
        completed_generations=completed.count(GENERATIONS),
        context=found,
    )
