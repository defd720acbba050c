"""Redis backend: one Lua script per state change (:mod:`.lua`), keys laid out in :mod:`.keys`.

:class:`RedisStore` is the :class:`~idemproxy.store.protocols.Store` the factory builds. It holds
one part per concern, all on the same client and pipelined connection:

- :class:`~.records.RedisRecords`: claims, settles, resolutions, renewals, record reads;
- :class:`~.journal.RedisJournal`: the outbox, delivery cursors, the audit log, archives;
- :class:`~.control.RedisControl`: the agents' pauses;
- :class:`~.agents.RedisAgents`: the agent registry and the worklists;
- :class:`~.safety.RedisMarker`: the store's marker and its log.

Connections are opened lazily, time out fast (a dead Redis is reported in a second or two,
not after a long retry loop) and come back by themselves when Redis does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.control import AgentControl, PauseRequest
from idemproxy.store.errors import InvalidStoreURL
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectRecord,
    RecordKey,
    ResolveRequest,
    ResolveResult,
    Settlement,
)
from idemproxy.store.redis import client as redis_client
from idemproxy.store.redis import durability as redis_durability
from idemproxy.store.redis import replicas
from idemproxy.store.redis.agents import LISTING_GRACE_S, REGISTRY_CAP, RedisAgents
from idemproxy.store.redis.control import RedisControl
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.journal import RedisJournal
from idemproxy.store.redis.pipeline import PipelinedRedis
from idemproxy.store.redis.records import RedisRecords
from idemproxy.store.redis.replicas import ReplicaWait
from idemproxy.store.redis.safety import RedisMarker
from idemproxy.store.retention import EVENT_RETENTION_S
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck
from idemproxy.store.work import Forgotten, Work

RedisClient = Redis | RedisCluster


class RedisStore:
    """The :class:`~idemproxy.store.protocols.Store` on Redis: single node, Sentinel or Cluster.

    Event ids are stream ids (``<ms>-<seq>``): ordered by the stream, opaque to callers. Events
    are kept ``event_retention_s``; the outbox stream of an agent quiet that long expires.
    """

    backend = "redis"

    def __init__(
        self,
        client: RedisClient,
        *,
        event_retention_s: int = EVENT_RETENTION_S,
        extra_clients: Sequence[Redis] = (),
        pipeline: PipelinedRedis | None = None,
        replica_wait: ReplicaWait | None = None,
        listing_grace_s: float = LISTING_GRACE_S,
        registry_cap: int = REGISTRY_CAP,
    ) -> None:
        """Use ``client`` (built with ``decode_responses=False``); the store closes it.

        With ``pipeline`` (to the same server) claims, settles, renewals, resolutions and record
        reads go over it instead. With ``replica_wait`` each claim waits for replicas to have it.
        ``listing_grace_s`` and ``registry_cap``: see :mod:`.agents`.
        """
        self._client = client
        self._extra_clients = tuple(extra_clients)
        self._pipeline = pipeline
        retention_ms = event_retention_s * 1000
        self.agents = RedisAgents(
            client, pipeline=pipeline, listing_grace_s=listing_grace_s, registry_cap=registry_cap
        )
        self._records = RedisRecords(
            client,
            self.agents,
            retention_ms=retention_ms,
            pipeline=pipeline,
            replica_wait=replica_wait,
        )
        self._journal = RedisJournal(client, retention_ms)
        self._control = RedisControl(client, self.agents)
        self._marker = RedisMarker(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        event_retention_s: int = EVENT_RETENTION_S,
        listing_grace_s: float = LISTING_GRACE_S,
    ) -> RedisStore:
        """Build from ``redis://``, ``rediss://``, ``redis+sentinel://`` or ``redis+cluster://``.

        Nothing is connected yet: a Redis that is down now is found out by the first call.
        The ``wait_*`` query parameters are the store's (:mod:`.replicas`); any other is
        redis-py's.
        """
        try:
            rest, wait = replicas.split_wait(url)
            clients = redis_client.clients_from_url(rest)
        except ValueError as exc:
            raise InvalidStoreURL(f"cannot use redis URL {url!r}: {exc}") from exc
        return cls(
            clients.client,
            event_retention_s=event_retention_s,
            extra_clients=clients.helpers,
            pipeline=clients.pipeline,
            replica_wait=wait,
            listing_grace_s=listing_grace_s,
        )

    async def ping(self) -> None:
        with translated("ping"):
            await self._client.ping()
            if self._pipeline is not None:
                await self._pipeline.execute("PING")

    async def now_ms(self) -> int:
        reply: Any
        with translated("now_ms"):
            reply = await self._client.time()
        seconds, micros = reply
        return int(seconds) * 1000 + int(micros) // 1000

    async def close(self) -> None:
        with translated("close"):
            await self._client.aclose()
            for client in self._extra_clients:
                await client.aclose()
            if self._pipeline is not None:
                await self._pipeline.close()

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self._records.claim(request)

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        return await self._records.settle(key, fence, settlement)

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        return await self._records.resolve(request)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        return await self._records.renew(key, fence, lease_ms)

    async def get(self, key: RecordKey) -> EffectRecord | None:
        return await self._records.get(key)

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self._records.list_unknown(agent, limit)

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        return await self._records.batch_records(agent, batch)

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self._records.sweep_expired(agent, limit)

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        return await self._journal.read_events(agent, after, limit)

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        return await self._journal.count_events(agent, after, cap)

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        return await self._journal.read_cursor(agent)

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        return await self._journal.write_cursor(agent, cursor, audit)

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._journal.append_audit(entry)

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        return await self._journal.read_audit(agent, limit)

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        return await self._journal.clear_batch(request)

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        return await self._journal.read_archive(agent, batch)

    async def list_agents(self) -> list[str]:
        with translated("list_agents"):
            return await self.agents.list_agents()

    async def list_busy_agents(self, work: Work) -> list[str]:
        with translated("list_busy_agents"):
            return await self.agents.list_busy_agents(work)

    async def forget_agents(self) -> Forgotten:
        with translated("forget_agents"):
            return await self.agents.forget_agents()

    async def read_control(self, agent: str) -> AgentControl:
        return await self._control.read_control(agent)

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        return await self._control.write_pause(request)

    async def durability(self) -> Durability:
        return await redis_durability.durability(self._client)

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        return await self._marker.check(seen)

    def expect_marker(self, marker: Marker | None) -> None:
        # On Redis Cluster the marker lives in a slot of its own, which no claim can read.
        if not isinstance(self._client, RedisCluster):
            self._records.expected_epoch = marker.epoch if marker is not None else ""

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self._marker.record_loss(kind, detail)

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self._marker.acknowledge(loss_id, actor, note)

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self._marker.read_log(limit)
