"""What a restarted agent reads about its batch before it re-runs it.

For now the admin API's batch progress (``GET /v1/agents/{agent}/batches/{batch}``); the
agent-scoped endpoint on the proxy listener replaces it, behind this same function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from idemproxy.integrations.steps import GENERATIONS
from tests.support.processes import ServedProxy, http_get


@dataclass(frozen=True)
class RecoveryContext:
    # The model's tool calls whose effects completed, in the batch's order; generations apart.
    completed_tool_calls: list[str]
    completed_generations: int
    progress: dict[str, Any]


def read_recovery_context(proxy: ServedProxy, agent: str, batch: str) -> RecoveryContext:
    url = f"{proxy.admin_url}/v1/agents/{quote(agent, safe='')}/batches/{quote(batch, safe='')}"
    status, body = http_get(url)
    assert status == 200, body
    progress: dict[str, Any] = orjson.loads(body)
    completed = [action["tool_call"] for action in progress["completed"]]
    return RecoveryContext(
        completed_tool_calls=[call for call in completed if call != GENERATIONS],
        completed_generations=completed.count(GENERATIONS),
        progress=progress,
    )
