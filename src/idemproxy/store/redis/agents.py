"""The agent registry and the worklists of the Redis store (:mod:`idemproxy.store.work`).

``idem:agents`` lists every agent for operators; the worklists list the agents the sweep,
delivery and the approvals' console visit. An agent's records live in its own slot and the
worklists in another, so no script can change both: a proxy lists an agent *before* the claim,
pause or approval's step that may give it work, and the sweep drops an agent only when it
finds no work in the agent's slot and no proxy has listed the agent for ``listing_grace_s``.
A proxy lists each agent again every tenth of the grace, so a claim that relies on a listing
runs well within the grace of it; a claim whose answer comes later than half the grace lists
its agent again, and one that failed (it may yet run) has the next claim list it again.

A store that finds the worklists never seeded (the store was written by a version without
them) walks ``idem:agents`` a page per sweep and lists every agent that has work. Work that a
proxy of such a version gives an agent after the walk passed it is found once a newer proxy
lists that agent; deleting ``idem:{:agents}:seeded`` has the next store to start walk again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.clock import wall_ms
from idemproxy.store.redis import lua
from idemproxy.store.redis.argv import ForgetArgs, ListArgs, ScriptArg, StaleArgs, TrimRegistryArgs
from idemproxy.store.redis.keys import (
    AGENTS_KEY,
    SEEDED_KEY,
    approvals_key,
    control_key,
    cursor_key,
    leases_key,
    outbox_key,
    unknown_key,
    worklist_key,
)
from idemproxy.store.redis.pipeline import PipelinedRedis, PipelinedScript
from idemproxy.store.retention import DEFAULT_RETENTION, Retention
from idemproxy.store.work import Forgotten, Work

T = TypeVar("T")

LISTING_GRACE_S = 600.0
# Past this many agents the registry forgets the least recently seen (operators no longer see
# them listed; their records stay). The worklists have no cap: dropping one would lose work.
REGISTRY_CAP = 100_000


def forget_after_ms(retention: Retention) -> int:
    """Registry members unseen for longer than anything of theirs lives are dropped."""
    return (max(retention.audit_s, retention.archive_s) + 86_400) * 1000


# Agents a sweep checks for work (worklist entries past their grace, or registry members while
# seeding): this bounds what one pass costs, however many agents there are.
CHECKS_PER_PASS = 500

# In the order of the work script's answer (scripts/work.lua).
_WORKS = (Work.REVIEW, Work.DELIVERY, Work.APPROVAL)
_WORKLISTS = [worklist_key(work) for work in _WORKS]


class RedisAgents:
    """:meth:`Store.list_agents`, :meth:`Store.list_busy_agents` and
    :meth:`Store.forget_agents` on Redis, and the listing that claims and pauses do first."""

    def __init__(
        self,
        client: Redis | RedisCluster,
        *,
        pipeline: PipelinedRedis | None = None,
        listing_grace_s: float = LISTING_GRACE_S,
        registry_cap: int = REGISTRY_CAP,
        retention: Retention = DEFAULT_RETENTION,
    ) -> None:
        """With ``pipeline``, listings go over it, in line with the claims they come before."""
        self._client = client
        self._forget_after_ms = forget_after_ms(retention)
        self._pipeline = pipeline
        self.listing_grace_s = listing_grace_s
        self._grace_ms = int(listing_grace_s * 1000)
        self._relist_s = listing_grace_s / 10
        self._registry_cap = registry_cap
        # Agent -> monotonic time it was last listed, oldest first: entries past the relisting
        # interval serve no purpose and are dropped, so it holds only the agents of the moment.
        self._listed: OrderedDict[str, float] = OrderedDict()
        self._seeded = False
        self._walk_score = float("-inf")  # where the seeding walk of the registry stands
        self._walk_skip = 0  # members of that score already checked
        self._list: Any = client.register_script(lua.LIST.source)
        self._list_now: Any = self._list
        if pipeline is not None:
            self._list_now = PipelinedScript(pipeline, lua.LIST.source)
        self._stale = client.register_script(lua.STALE.source)
        self._forget = client.register_script(lua.FORGET.source)
        self._work = client.register_script(lua.WORK.source)
        self._trim = client.register_script(lua.TRIM_REGISTRY.source)

    async def register(self, agent: str) -> float:
        """List the agent in the registry and on the worklists, unless this process did so
        within the relisting interval; returns when that listing was (errors: Redis's)."""
        now = time.monotonic()
        while self._listed:
            oldest, since = next(iter(self._listed.items()))
            if now - since < self._relist_s:
                break
            del self._listed[oldest]
        listed_at = self._listed.get(agent)
        if listed_at is not None:
            return listed_at
        if self._pipeline is None:
            seen = self._client.zadd(AGENTS_KEY, {agent.encode(): wall_ms()})
        else:
            seen = self._pipeline.execute("ZADD", AGENTS_KEY, wall_ms(), agent)
        await asyncio.gather(
            seen, self._list_now(keys=_WORKLISTS, args=lua.LIST.argv(ListArgs((agent,))))
        )
        self._listed[agent] = now
        return now

    async def listed(self, agent: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, which may give the agent work, with the agent listed before it runs."""
        listed_at = await self.register(agent)
        try:
            result = await call()
        except BaseException:
            self._listed.pop(agent, None)  # it may yet run: the next call lists the agent again
            raise
        if time.monotonic() - listed_at > self.listing_grace_s / 2:
            # It ran so late that the sweep may have dropped the agent meanwhile.
            self._listed.pop(agent, None)
            await self.register(agent)
        return result

    async def list_agents(self) -> list[str]:
        members: Any
        await self._client.zremrangebyscore(AGENTS_KEY, "-inf", wall_ms() - self._forget_after_ms)
        members = await self._client.zrange(AGENTS_KEY, 0, -1)
        return sorted(_decoded(members))

    async def list_busy_agents(self, work: Work) -> list[str]:
        members: Any = await self._client.zrange(worklist_key(work), 0, -1)
        return sorted(_decoded(members))

    async def forget_agents(self) -> Forgotten:
        over_cap = await self._trim(
            keys=[AGENTS_KEY],
            args=lua.TRIM_REGISTRY.argv(
                TrimRegistryArgs(wall_ms() - self._forget_after_ms, self._registry_cap)
            ),
        )
        if not self._seeded:
            await self._seed()
        stale_args = lua.STALE.argv(StaleArgs(self._grace_ms, CHECKS_PER_PASS))
        reply: Any = await self._stale(keys=_WORKLISTS, args=stale_args)
        before, stale = reply[0], [_decoded(members) for members in reply[1:]]
        found = {agent: await self._work_of(agent) for agent in set().union(*stale)}
        entries: list[ScriptArg] = []
        for worklist, agents in enumerate(stale):
            for agent in agents:
                entries += [agent, worklist + 1, found[agent][worklist]]
        args = lua.FORGET.argv(ForgetArgs(before, tuple(entries)))
        idle = int(await self._forget(keys=_WORKLISTS, args=args)) if found else 0
        return Forgotten(idle=idle, over_cap=int(over_cap))

    async def _work_of(self, agent: str) -> tuple[int, ...]:
        """Whether the agent has each work of ``_WORKS`` (1 or 0 each)."""
        keys = [
            leases_key(agent),
            unknown_key(agent),
            control_key(agent),
            cursor_key(agent),
            outbox_key(agent),
            approvals_key(agent),
        ]
        reply: Any = await self._work(keys=keys)
        return tuple(int(has) for has in reply)

    async def _seed(self) -> None:
        """Check the next page of the registry and list its agents with work; once through,
        mark the worklists seeded so that no store walks the registry again."""
        if await self._client.exists(SEEDED_KEY):
            self._seeded = True
            return
        page: Any = await self._client.zrangebyscore(
            AGENTS_KEY,
            self._walk_score,
            "+inf",
            start=self._walk_skip,
            num=CHECKS_PER_PASS,
            withscores=True,
        )
        agents = _decoded([member for member, _ in page])
        busy = [agent for agent in agents if any(await self._work_of(agent))]
        if busy:
            await self._list(keys=_WORKLISTS, args=lua.LIST.argv(ListArgs(tuple(busy))))
        if len(page) < CHECKS_PER_PASS:
            await self._client.set(SEEDED_KEY, b"1")
            self._seeded = True
            return
        # Members of one score are ordered by name, so the next page starts after those of the
        # last score that this one held.
        last = page[-1][1]
        held = sum(1 for _, score in page if score == last)
        self._walk_skip = held + (self._walk_skip if last == self._walk_score else 0)
        self._walk_score = last


def _decoded(members: Sequence[bytes]) -> list[str]:
    return [member.decode() for member in members]
