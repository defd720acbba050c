"""One Redis connection with many commands in flight: the store's hot path.

redis-py lends every command a pooled connection for its round trip: a pool checkout, a retry
wrapper, a stream write and a stream read, all in Python. A recorded request makes two such
commands (the claim and the settle scripts), so that was a large part of its cost. Redis
answers the commands of one connection in the order they came, so the commands of all requests
can share one connection instead: a call queues its command and a future, and each reply that
arrives resolves the oldest future. hiredis packs the commands and parses the replies in C.
The commands of one turn of the event loop leave in one write, and under load one read brings
the replies of many requests at once. A call then costs a fraction of redis-py's
(docs/performance.md, "Redis store", has the figures).

Failures, so that a dead or stuck Redis is reported quickly and nothing is sent twice:

- Connecting, with AUTH and SELECT, takes at most ``connect_timeout_s``; callers arriving
  meanwhile wait for that one attempt.
- A reply that has not come ``reply_timeout_s`` after its command was written means Redis is
  stuck (stopped, partitioned, or busy in a long script). The connection is dropped and every
  call waiting on it fails with a timeout. Replies come in order, so one timer, set for the
  oldest command waiting, watches them all.
- A lost connection fails every call waiting on it; the next call connects anew. A command that
  was written is never sent again by this module: it may have run.

A claim that must reach the replicas before it counts (``wait_replicas``) asks for ``WAIT``
behind it: one ``WAIT``, written after the commands of the loop turn, answers for all of them,
since it waits for every write the connection made before it.

Errors are raised as redis-py's exception classes, so the store translates them as it does
those of redis-py's own client. Used for single-node ``redis://`` URLs; TLS, Sentinel and
Cluster go through redis-py alone (see :mod:`idemproxy.store.redis.client`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import hiredis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from idemproxy.store.redis.wire import Arg, Endpoint, Wire, reply_error


class PipelinedRedis:
    """Commands of many concurrent callers on one connection, made on first use."""

    def __init__(
        self, endpoint: Endpoint, *, connect_timeout_s: float, reply_timeout_s: float
    ) -> None:
        self.endpoint = endpoint
        self._connect_timeout_s = connect_timeout_s
        self._reply_timeout_s = reply_timeout_s
        self._wire: Wire | None = None
        self._connecting = asyncio.Lock()

    async def execute(self, *args: Arg) -> Any:
        """Send one command and return its reply; an error reply is raised."""
        wire = self._wire
        if wire is None or wire.failure is not None:
            wire = await self._connected()
        reply = await wire.send(args)
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(reply)
        return reply

    async def execute_then(self, trailer: tuple[Arg, ...], *args: Arg) -> tuple[Any, object]:
        """Send one command, then ``trailer`` on the same connection (``WAIT``: see above).

        Returns the command's reply (an error reply is raised) and the trailer's: its reply,
        or the error it met, as a value; the command has run either way.
        """
        wire = self._wire
        if wire is None or wire.failure is not None:
            wire = await self._connected()
        reply_future, trailer_future = wire.send_then(args, trailer)
        reply = await reply_future
        if isinstance(reply, hiredis.ReplyError):
            raise reply_error(reply)
        trailed: object
        try:
            # Shared with the other calls of the turn: one caller cancelled must not cancel it.
            trailed = await asyncio.shield(trailer_future)
        except RedisError as exc:
            trailed = exc
        if isinstance(trailed, hiredis.ReplyError):
            trailed = reply_error(trailed)
        return reply, trailed

    async def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None

    async def _connected(self) -> Wire:
        async with self._connecting:
            wire = self._wire
            if wire is None or wire.failure is not None:
                wire = self._wire = await self._connect()
            return wire

    async def _connect(self) -> Wire:
        endpoint, loop = self.endpoint, asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                wire = await self._open(loop)
                try:
                    await self._ready(wire)
                except BaseException:
                    wire.close()
                    raise
        except TimeoutError:
            raise RedisTimeoutError(f"Timeout connecting to Redis at {endpoint}") from None
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to Redis at {endpoint}: {exc}") from exc
        return wire

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Wire:
        endpoint = self.endpoint
        wire: Wire
        _, wire = await loop.create_connection(
            lambda: Wire(endpoint, self._reply_timeout_s), endpoint.host, endpoint.port
        )
        return wire

    async def _ready(self, wire: Wire) -> None:
        for command in self.endpoint.handshake():
            reply = await wire.send(command)
            if isinstance(reply, hiredis.ReplyError):
                raise reply_error(reply)


class PipelinedScript:
    """A Lua script run by EVALSHA on a :class:`PipelinedRedis`; loaded again when Redis lost it.

    Called like redis-py's ``AsyncScript``, so the store runs either the same way.
    """

    def __init__(self, redis: PipelinedRedis, source: str) -> None:
        self._redis = redis
        self._source = source
        self._sha = hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()

    async def __call__(self, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        return await self._run(self._redis.execute, keys, args)

    async def then(
        self, trailer: tuple[Arg, ...], keys: Sequence[Arg], args: Sequence[Arg]
    ) -> tuple[Any, object]:
        """Run, then ``trailer`` on the same connection (:meth:`PipelinedRedis.execute_then`)."""
        send = functools.partial(self._redis.execute_then, trailer)
        result: tuple[Any, object] = await self._run(send, keys, args)
        return result

    async def _run(
        self, send: Callable[..., Awaitable[Any]], keys: Sequence[Arg], args: Sequence[Arg]
    ) -> Any:
        try:
            return await send("EVALSHA", self._sha, len(keys), *keys, *args)
        except NoScriptError:
            # Redis restarted or its script cache was flushed. NOSCRIPT means nothing ran, and
            # EVAL both runs the script and caches it again.
            return await send("EVAL", self._source, len(keys), *keys, *args)


class Script(Protocol):
    """A registered Lua script: redis-py's ``AsyncScript`` or a :class:`PipelinedScript`."""

    def __call__(self, keys: Sequence[str], args: Sequence[Arg]) -> Awaitable[Any]: ...


def hot_script(
    client: Redis | RedisCluster, pipeline: PipelinedRedis | None, source: str
) -> Script:
    """``source`` run over ``pipeline`` where there is one, else through ``client``."""
    if pipeline is None:
        return client.register_script(source)
    return PipelinedScript(pipeline, source)
