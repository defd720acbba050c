"""Redis backend: one Lua script per state change (:mod:`.lua`), keys laid out in :mod:`.keys`.

:class:`RedisStore` is the :class:`~idemproxy.store.protocols.Store` the factory builds. It holds
one part per concern, all on the same client and pipelined connection:

- :class:`~.records.RedisRecords`: claims, settles, resolutions, renewals, record reads;
- :class:`~.journal.RedisJournal`: the outbox, delivery cursors, the audit log, archives;
- :class:`~.control.RedisControl`: the agents' pauses, and their listings;
- :class:`~.approvals.RedisApprovals`: effects held for an operator's approval;
- :class:`~.agents.RedisAgents`: the agent registry and the worklists;
- :class:`~.safety.RedisSafety`: the store's durability, its marker and its log.

Connections are opened lazily, time out fast (a dead Redis is reported in a second or two,
not after a long retry loop) and come back by themselves when Redis does.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.composed import ComposedStore
from idemproxy.store.errors import InvalidStoreURL
from idemproxy.store.redis import client as redis_client
from idemproxy.store.redis import replicas
from idemproxy.store.redis.agents import LISTING_GRACE_S, REGISTRY_CAP, RedisAgents
from idemproxy.store.redis.approvals import RedisApprovals
from idemproxy.store.redis.control import RedisControl
from idemproxy.store.redis.journal import RedisJournal
from idemproxy.store.redis.pipeline import PipelinedRedis
from idemproxy.store.redis.records import RedisRecords
from idemproxy.store.redis.replicas import ReplicaWait
from idemproxy.store.redis.safety import RedisSafety
from idemproxy.store.retention import DEFAULT_RETENTION, Retention

RedisClient = Redis | RedisCluster


class RedisStore(ComposedStore):
    """The :class:`~idemproxy.store.protocols.Store` on Redis: single node, Sentinel or Cluster.

    Event ids are stream ids (``<ms>-<seq>``): ordered by the stream, opaque to callers. What is
    not a record is kept as ``retention`` says: the outbox stream of an agent quiet for its
    ``events_s`` expires, and so on.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        retention: Retention = DEFAULT_RETENTION,
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
        self.agents = RedisAgents(
            client,
            pipeline=pipeline,
            listing_grace_s=listing_grace_s,
            registry_cap=registry_cap,
            retention=retention,
        )
        records = RedisRecords(
            client,
            self.agents,
            retention=retention,
            pipeline=pipeline,
            replica_wait=replica_wait,
            extra_clients=extra_clients,
        )
        journal = RedisJournal(client, retention, self.agents)
        control = RedisControl(client, self.agents, retention)
        safety = RedisSafety(client, records)
        approvals = RedisApprovals(client, self.agents, retention)
        super().__init__(
            records, journal, control, safety, approvals=approvals, retention=retention
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        retention: Retention = DEFAULT_RETENTION,
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
            retention=retention,
            extra_clients=clients.helpers,
            pipeline=clients.pipeline,
            replica_wait=wait,
            listing_grace_s=listing_grace_s,
        )
