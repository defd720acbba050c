"""The pause check of requests that claim nothing: cached a second per agent, for few agents."""

from __future__ import annotations

import pytest

from idemproxy.effects.paused import PauseGate
from idemproxy.errors import RequestRefused
from idemproxy.store.control import AgentControl, Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def read_control(self, agent: str) -> AgentControl:
        self.reads.append(agent)
        return await super().read_control(agent)


async def test_a_pause_is_read_once_a_second_per_agent() -> None:
    store = CountingStore()
    pause = Pause(PauseOrigin.OPERATOR, "hands off", "alice")
    await store.write_pause(
        PauseRequest("bot", 0, pause, AuditEntry("bot", "agent.pause", "alice", "bot"))
    )
    gate = PauseGate(store.read_control)
    for _ in range(3):
        with pytest.raises(RequestRefused):
            await gate.check("bot")
    assert store.reads == ["bot"]


async def test_the_agents_read_longest_ago_make_room_for_new_ones() -> None:
    store = CountingStore()
    gate = PauseGate(store.read_control, max_agents=2)
    for agent in ("a", "b", "c", "b", "a"):
        await gate.check(agent)
    # "a" made room for "c", so it is read again; "b" was still kept.
    assert store.reads == ["a", "b", "c", "a"]
