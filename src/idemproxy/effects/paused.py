"""A paused agent's effects: answered 503 ``agent-paused`` with the reason, nothing forwarded.

Effects with a key learn of the pause from their claim, at no cost of their own (the store
checks it in the same step). Effects a route forwards unprotected (``on_missing_key:
passthrough``) claim nothing, so they ask :class:`PauseGate`, which keeps each agent's pause
for a second: a pause reaches them that much later, and the store is asked at most once a
second per agent instead of once per request.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.store.control import AgentControl, Pause, PauseOrigin
from idemproxy.store.errors import StoreError

log = logging.getLogger(__name__)

CACHE_S = 1.0
# Pauses kept at most: those of the agents of the moment, not of every agent id ever sent.
MAX_AGENTS = 10_000

# The header that marks an operator's compensation (ledger/compensator.py): it is sent while
# the agent is paused, and neither waits for nor counts toward the agent's pause. Only with the
# seal of the proxy's own sender (effects/seal.py); an agent's copy of it is refused.
COMPENSATES_HEADER = "Idem-Compensates"

# Reads an agent's control from the store (Control.read_control): the one thing the gate needs
# of it, so the proxy's effects depend on the record store alone.
ReadControl = Callable[[str], Awaitable[AgentControl]]


def agent_paused(agent: str, pause: Pause) -> RequestRefused:
    who = "automatically" if pause.origin is PauseOrigin.AUTO else f"by {pause.actor}"
    return RequestRefused(
        ProblemCode.AGENT_PAUSED,
        f"agent {agent!r} was paused {who} ({pause.reason}), so nothing was sent; its effects"
        f" wait until an operator fixes the cause and runs `idemproxy agent resume {agent}`",
        extra={
            "agent": agent,
            "paused_by": pause.origin.value,
            "reason": pause.reason,
            "since_ms": pause.since_ms,
        },
    )


class PauseGate:
    """The pause check of requests that claim nothing, from a cache of one second."""

    def __init__(
        self, read_control: ReadControl, cache_s: float = CACHE_S, max_agents: int = MAX_AGENTS
    ) -> None:
        self._read_control = read_control
        self._cache_s = cache_s
        self._max_agents = max_agents
        # Agent -> when its pause was read and what it was, least recently read first.
        self._seen: OrderedDict[str, tuple[float, Pause | None]] = OrderedDict()

    async def check(self, agent: str) -> None:
        """Raise ``agent-paused`` if the agent is paused; a store outage lets it pass, as an
        unprotected request needs no store otherwise."""
        now = time.monotonic()
        seen = self._seen.get(agent)
        if seen is None or now - seen[0] >= self._cache_s:
            try:
                pause = (await self._read_control(agent)).pause
            except StoreError as exc:
                log.warning("pause check skipped: store unavailable", extra={"reason": str(exc)})
                pause = seen[1] if seen is not None else None
            seen = self._seen[agent] = (now, pause)
            self._seen.move_to_end(agent)
            if len(self._seen) > self._max_agents:
                self._seen.popitem(last=False)
        if seen[1] is not None:
            raise agent_paused(agent, seen[1])
