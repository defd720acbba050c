"""Redis clients built from store URLs: single node, Sentinel and Cluster, all lazy.

::

    redis://[user:pass@]host[:port][/db]            rediss:// for TLS
    redis+sentinel://[user:pass@]host[:port][,host[:port]...]/service_name[/db]
    redis+cluster://[user:pass@]host[:port][,host[:port]...]

Building a client opens no connection, so a Redis that is down at start-up is found out by the
first call and reported as unavailable, not as a bad URL.

A single node over plain TCP also gets a :class:`~idemproxy.store.redis.pipeline.PipelinedRedis`
for the store's hot path (claims and settles). TLS does not: redis-py takes a dozen TLS options
in the URL, and one implementation of them is enough; such a store runs every command through
redis-py, only more slowly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ConstantBackoff
from redis.exceptions import ConnectionError

from idemproxy.store.redis import connection as redis_connection
from idemproxy.store.redis.pipeline import PipelinedRedis
from idemproxy.store.redis.wire import Endpoint

CONNECT_TIMEOUT_S = 1.0
OPERATION_TIMEOUT_S = 2.0
# Every concurrent command holds one pooled connection for a round trip of well under a
# millisecond, so this many serve thousands of requests in flight.
POOL_CONNECTIONS = 100
SENTINEL_PORT = 26379
REDIS_PORT = 6379


def client_options() -> dict[str, Any]:
    """Connection settings shared by every kind of Redis client the store builds.

    One quick retry, on connection errors only: it replaces a pooled connection that Redis
    closed (a restart) without making a dead server look alive for long. A timeout is not
    retried, because the script may have run and a claim or settle must not run twice.
    """
    return {
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": OPERATION_TIMEOUT_S,
        "retry": Retry(ConstantBackoff(0.05), 1, supported_errors=(ConnectionError,)),
    }


class BoundedPool(ConnectionPool):
    """A pool where a command past ``max_connections`` waits for a free connection.

    redis-py's own pool fails such a command ("Too many connections"), and its
    BlockingConnectionPool waits but takes a condition and a timer on every command, which a
    busy proxy pays for in CPU (docs/performance.md, "Redis store"). A semaphore costs a counter
    until the pool is exhausted; a command that cannot get a connection within
    OPERATION_TIMEOUT_S fails as a connection error, which the store reports as unavailable.
    """

    def __init__(self, **kwargs: Any) -> None:
        connection_class = kwargs.pop("connection_class", Connection)
        super().__init__(connection_class=redis_connection.cheaper(connection_class), **kwargs)
        self._slots = asyncio.Semaphore(self.max_connections)
        # Connections handed out, each holding a slot. The base class also calls release()
        # itself, for a connection it could not connect: that one never got to hold a slot.
        self._lent: set[AbstractConnection] = set()

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if self._slots.locked():
            try:
                async with asyncio.timeout(OPERATION_TIMEOUT_S):
                    await self._slots.acquire()
            except TimeoutError:
                raise ConnectionError("no pooled Redis connection came free in time") from None
        else:
            await self._slots.acquire()
        try:
            connection: AbstractConnection
            connection = await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        except BaseException:
            self._slots.release()
            raise
        self._lent.add(connection)
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        try:
            await super().release(connection)
        finally:
            if connection in self._lent:
                self._lent.discard(connection)
                self._slots.release()


@dataclass(frozen=True)
class RedisClients:
    """What a store URL gives: the client, the Sentinels to close with it, and the hot path's
    pipelined connection where there is one."""

    client: Redis | RedisCluster
    helpers: tuple[Redis, ...] = ()
    pipeline: PipelinedRedis | None = None


def clients_from_url(url: str) -> RedisClients:
    """Raises ``ValueError`` for a URL that names no Redis deployment or cannot be parsed."""
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        pool = BoundedPool.from_url(url, max_connections=POOL_CONNECTIONS, **client_options())
        return RedisClients(Redis.from_pool(pool), pipeline=_pipeline(pool))
    if scheme == "redis+sentinel":
        master, sentinels = _sentinel_clients(url)
        return RedisClients(master, tuple(sentinels))
    if scheme == "redis+cluster":
        return RedisClients(_cluster_client(url))
    raise ValueError(f"unknown scheme {scheme!r}")


def _pipeline(pool: ConnectionPool) -> PipelinedRedis | None:
    """A pipelined connection to the server of a plain-TCP pool, as redis-py read its URL."""
    if issubclass(pool.connection_class, SSLConnection):
        return None
    options = pool.connection_kwargs
    endpoint = Endpoint(
        host=options.get("host", "localhost"),
        port=int(options.get("port", REDIS_PORT)),
        db=int(options.get("db", 0)),
        username=options.get("username"),
        password=options.get("password"),
    )
    return PipelinedRedis(
        endpoint, connect_timeout_s=CONNECT_TIMEOUT_S, reply_timeout_s=OPERATION_TIMEOUT_S
    )


def _sentinel_clients(url: str) -> tuple[Redis, list[Redis]]:
    """``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]``."""
    parts = urlsplit(url)
    username, password, hosts = _hosts(parts.netloc, default_port=SENTINEL_PORT)
    path = [segment for segment in parts.path.split("/") if segment]
    if not 1 <= len(path) <= 2:
        raise ValueError("the path must be /service_name or /service_name/db")
    db = int(path[1]) if len(path) == 2 else 0
    options = client_options()
    sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        hosts,
        sentinel_kwargs={k: v for k, v in options.items() if k != "retry"},
        **options,
    )
    master = sentinel.master_for(unquote(path[0]), db=db, username=username, password=password)
    return master, list(sentinel.sentinels)


def _cluster_client(url: str) -> RedisCluster:
    """``redis+cluster://[user:pass@]host:port[,host:port...]``: any nodes; the rest are found."""
    parts = urlsplit(url)
    username, password, hosts = _hosts(parts.netloc, default_port=REDIS_PORT)
    if parts.path.strip("/"):
        raise ValueError("a cluster URL has no path: Redis Cluster has only database 0")
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in hosts],
        username=username,
        password=password,
        **client_options(),
    )


def _hosts(netloc: str, default_port: int) -> tuple[str | None, str | None, list[tuple[str, int]]]:
    userinfo, _, hostlist = netloc.rpartition("@")
    user, _, secret = userinfo.partition(":")
    hosts = []
    for item in hostlist.split(","):
        parsed = urlsplit(f"//{item}")
        if not parsed.hostname:
            raise ValueError(f"no host in {item!r}")
        hosts.append((parsed.hostname, parsed.port or default_port))
    return unquote(user) or None, unquote(secret) or None, hosts
