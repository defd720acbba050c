"""The agent controls of the Redis store (store/control.py): reading and writing a pause.

Counting failures happens inside the settle script and the pause check inside the claim script
(``scripts/settle.lua``, ``scripts/claim.lua``); the keys are those of :mod:`.keys`, all in the
agent's slot.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.batches import BatchStart
from idemproxy.store.control import (
    MAX_STREAK,
    AgentControl,
    FailedAttempt,
    Pause,
    PauseOrigin,
    PauseRequest,
    pause_event,
)
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import Settlement
from idemproxy.store.redis import batches, lua
from idemproxy.store.redis.agents import RedisAgents
from idemproxy.store.redis.argv import StreakArgs, WritePauseArgs
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.fields import ControlField
from idemproxy.store.redis.journal import audit_args
from idemproxy.store.redis.keys import (
    audit_key,
    control_key,
    cursor_key,
    outbox_key,
    snapshot_key,
    streak_key,
)
from idemproxy.store.retention import Retention
from idemproxy.store.work import Forgotten, Work

_PAUSE_FIELDS = (ControlField.PAUSED, ControlField.REASON, ControlField.ACTOR, ControlField.SINCE)


def control_keys(agent: str) -> list[str]:
    return [control_key(agent), streak_key(agent), snapshot_key(agent)]


def streak_args(settlement: Settlement, agent: str, retention: Retention) -> StreakArgs:
    """What the settle script needs to count the outcome: pause after
    ``settlement.pause_after_failures`` failures."""
    limit, error = settlement.pause_after_failures, settlement.failure()
    retention_ms = retention.control_ms
    # The automatic pause's audit entry is kept as long as the control it changed.
    return StreakArgs(
        pause_after=limit,
        failed=error is not None,
        error=error or "",
        agent=agent,
        control_retention_ms=retention_ms,
        audit_retention_ms=retention_ms,
        longest=MAX_STREAK,
    )


class RedisControl:
    """The agent controls of :class:`~idemproxy.store.redis.store.RedisStore`: reading and
    writing a pause, and the agent listings its registry (:mod:`.agents`) keeps."""

    def __init__(
        self, client: Redis | RedisCluster, agents: RedisAgents, retention: Retention
    ) -> None:
        """``agents`` lists each agent before a pause is written; a pause's event goes to the
        outbox, kept ``retention.events_s``."""
        self._agents = agents
        self._retention = retention
        self._client = client
        self._read_control = client.register_script(lua.READ_CONTROL.source)
        self._write_pause = client.register_script(lua.WRITE_PAUSE.source)

    async def read_control(self, agent: str) -> AgentControl:
        reply: Any
        with translated("read_control"):
            reply = await self._read_control(keys=control_keys(agent))
        return decode_control(agent, reply)

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        agent, version, pause, audit = request.agent, request.version, request.pause, request.audit
        reset_failures = request.reset_failures
        args = lua.WRITE_PAUSE.argv(
            WritePauseArgs(
                version=version,
                set_pause=pause is not None,
                origin=pause.origin.value if pause else "",
                reason=pause.reason if pause else "",
                actor=pause.actor if pause else "",
                reset_failures=reset_failures,
                control_retention_ms=self._retention.control_ms,
                audit=audit_args(audit, self._retention.audit_ms),
                event_retention_ms=self._retention.events_ms,
                event_reason=pause_event(request)[1],
            )
        )
        reply: Any
        with translated("write_pause"):
            # Before the pause: a paused agent must be on the sweep's worklist, to be counted.
            await self._agents.register(agent)
            reply = await self._write_pause(
                keys=[*control_keys(agent), audit_key(agent), outbox_key(agent), cursor_key(agent)],
                args=args,
            )
        return decode_control(agent, reply[1]) if int(reply[0]) == 1 else None

    async def list_agents(self) -> list[str]:
        with translated("list_agents"):
            return await self._agents.list_agents()

    async def list_busy_agents(self, work: Work) -> list[str]:
        with translated("list_busy_agents"):
            return await self._agents.list_busy_agents(work)

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        with translated("list_batches"):
            return await batches.list_batches(self._client, agent, limit)

    async def forget_agents(self) -> Forgotten:
        with translated("forget_agents"):
            return await self._agents.forget_agents()


def decode_pause(origin: bytes, reason: bytes, actor: bytes, since: bytes) -> Pause:
    return Pause(PauseOrigin(origin.decode()), reason.decode(), actor.decode(), int(since))


def decode_control(agent: str, reply: Any) -> AgentControl:
    """A control from READ_CONTROL's reply: the hash (flat) and the two lists."""
    try:
        raw, streak, snapshot = reply
        fields = dict(zip(raw[::2], raw[1::2], strict=True))
        pause = None
        if fields.get(ControlField.PAUSED.encode()):
            pause = decode_pause(*(fields[name.encode()] for name in _PAUSE_FIELDS))
        version = int(fields.get(ControlField.VERSION.encode(), b"0"))
        return AgentControl(pause, _attempts(streak), _attempts(snapshot), version)
    except (KeyError, ValueError, TypeError) as exc:
        raise StoreCorrupt(f"the control of agent {agent!r} cannot be decoded: {exc!r}") from exc


def _attempts(entries: list[bytes]) -> tuple[FailedAttempt, ...]:
    attempts = []
    for entry in entries:
        fence, _, effect_id = entry.decode().partition(" ")
        attempts.append(FailedAttempt(effect_id, int(fence)))
    return tuple(attempts)
