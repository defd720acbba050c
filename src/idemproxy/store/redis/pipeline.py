"""One Redis connection with many commands in flight: the store's hot path.

redis-py lends every command a pooled connection for its round trip: a pool checkout, a retry
wrapper, a stream write and a stream read, some 60 us of Python per command on the bench VM.
A recorded request makes two such commands (the claim and the settle scripts), so that was a
large part of its cost. Redis answers the commands of one connection in the order they came,
so the commands of all requests can share one connection instead: a call queues its command
and a future, and each reply that arrives resolves the oldest future. hiredis packs the
commands and parses the replies in C. The commands of one turn of the event loop leave in one
write, and under load one read brings the replies of many requests at once. A call then costs
about a quarter of redis-py's.

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
import collections
import functools
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import hiredis
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ExecAbortError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

Arg = str | int | bytes

# Error replies by their first word; anything else is a ResponseError, as redis-py has it.
_REPLY_ERRORS: dict[str, type[RedisError]] = {
    "NOSCRIPT": NoScriptError,
    "READONLY": ReadOnlyError,
    "OOM": OutOfMemoryError,
    "LOADING": BusyLoadingError,
    "NOAUTH": AuthenticationError,
    "WRONGPASS": AuthenticationError,
    "NOPERM": NoPermissionError,
    "EXECABORT": ExecAbortError,
}


def reply_error(error: hiredis.ReplyError) -> RedisError:
    message = str(error)
    return _REPLY_ERRORS.get(message.partition(" ")[0], ResponseError)(message)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the Redis server is, and who to be there."""

    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    username: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    def handshake(self) -> list[tuple[Arg, ...]]:
        """The commands that make a new connection ready for use."""
        commands: list[tuple[Arg, ...]] = []
        if self.password is not None:
            user = () if self.username is None else (self.username,)
            commands.append(("AUTH", *user, self.password))
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


class _Wire(asyncio.Protocol):
    """The connection itself: writes commands and hands each reply to the oldest waiter."""

    def __init__(self, endpoint: Endpoint, reply_timeout_s: float) -> None:
        self._endpoint = endpoint
        self._reply_timeout_s = reply_timeout_s
        self._loop = asyncio.get_running_loop()
        self._reader = hiredis.Reader()
        # Each command written and not yet answered: its waiter and when its reply is due.
        self._waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._outgoing: list[bytes] = []  # commands to write at the end of this loop turn
        # Commands to write after those, once each however many calls asked: packed, waiter.
        self._trailers: dict[bytes, asyncio.Future[Any]] = {}
        self._watchdog: asyncio.TimerHandle | None = None
        self.failure: RedisError | None = None  # set once the connection can carry no more

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's do not derive from asyncio.Transport, so no isinstance).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while True:
            try:
                reply = self._reader.gets()
            except hiredis.ProtocolError as exc:
                self._fail(RedisConnectionError(f"Redis at {self._endpoint} sent garbage: {exc}"))
                return
            if reply is False:
                return
            if not self._waiting:
                self._fail(RedisConnectionError(f"Redis at {self._endpoint} sent an unasked reply"))
                return
            waiter, _ = self._waiting.popleft()
            if not waiter.done():  # its caller may have been cancelled meanwhile
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        cause = f": {exc}" if exc else ""
        self._fail(RedisConnectionError(f"connection to Redis at {self._endpoint} lost{cause}"))

    def send(self, args: tuple[Arg, ...]) -> asyncio.Future[Any]:
        """Write one command; the future gets its reply (an error reply as a value)."""
        if self.failure is not None:
            raise self.failure
        assert self._transport is not None
        waiter = self._loop.create_future()
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing.append(hiredis.pack_command(args))  # type: ignore[arg-type]  # the stub types a 1-tuple
        self._waiting.append((waiter, self._loop.time() + self._reply_timeout_s))
        if self._watchdog is None:
            self._watchdog = self._loop.call_at(self._waiting[0][1], self._watch)
        return waiter

    def send_then(
        self, args: tuple[Arg, ...], trailer: tuple[Arg, ...]
    ) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
        """Write one command, and ``trailer`` after all the commands of this loop turn.

        Calls of one turn that name the same trailer share it, and its reply's future.
        """
        reply = self.send(args)
        packed = hiredis.pack_command(trailer)  # type: ignore[arg-type]  # the stub types a 1-tuple
        waiter = self._trailers.get(packed)
        if waiter is None:
            waiter = self._trailers[packed] = self._loop.create_future()
            # Its callers may all be gone (cancelled) by the time it fails.
            waiter.add_done_callback(_consume_failure)
        return reply, waiter

    def _flush(self) -> None:
        """Write the commands of this turn of the loop: one system call for all of them.

        A write costs about as much as packing and parsing a command together, and a busy proxy
        sends several commands per turn. The transport buffers what the socket does not take at
        once; each caller waits for its reply, so that stays bounded by the calls in flight.
        """
        outgoing, self._outgoing = self._outgoing, []
        trailers, self._trailers = self._trailers, {}
        if self._transport is None:
            self._fail_trailers(trailers)
            return
        for packed, waiter in trailers.items():
            outgoing.append(packed)
            self._waiting.append((waiter, self._loop.time() + self._reply_timeout_s))
        self._transport.write(b"".join(outgoing))

    def close(self) -> None:
        self._fail(RedisConnectionError(f"connection to Redis at {self._endpoint} closed"))

    def _watch(self) -> None:
        self._watchdog = None
        if not self._waiting:
            return
        due = self._waiting[0][1]
        if due <= self._loop.time():
            self._fail(
                RedisTimeoutError(
                    f"Redis at {self._endpoint} sent no reply in {self._reply_timeout_s} s"
                )
            )
        else:
            self._watchdog = self._loop.call_at(due, self._watch)

    def _fail(self, failure: RedisError) -> None:
        """Give up the connection: every call waiting on it gets ``failure``."""
        if self.failure is None:
            self.failure = failure
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        while self._waiting:
            waiter, _ = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(failure)
        trailers, self._trailers = self._trailers, {}
        self._fail_trailers(trailers)
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()

    def _fail_trailers(self, trailers: dict[bytes, asyncio.Future[Any]]) -> None:
        """Trailers that will not be written: their commands' calls failed as well."""
        failure = self.failure or RedisConnectionError(f"connection to {self._endpoint} lost")
        for waiter in trailers.values():
            if not waiter.done():
                waiter.set_exception(failure)


def _consume_failure(waiter: asyncio.Future[Any]) -> None:
    if not waiter.cancelled():
        waiter.exception()


class PipelinedRedis:
    """Commands of many concurrent callers on one connection, made on first use."""

    def __init__(
        self, endpoint: Endpoint, *, connect_timeout_s: float, reply_timeout_s: float
    ) -> None:
        self.endpoint = endpoint
        self._connect_timeout_s = connect_timeout_s
        self._reply_timeout_s = reply_timeout_s
        self._wire: _Wire | None = None
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

    async def _connected(self) -> _Wire:
        async with self._connecting:
            wire = self._wire
            if wire is None or wire.failure is not None:
                wire = self._wire = await self._connect()
            return wire

    async def _connect(self) -> _Wire:
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

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Wire:
        endpoint = self.endpoint
        wire: _Wire
        _, wire = await loop.create_connection(
            lambda: _Wire(endpoint, self._reply_timeout_s), endpoint.host, endpoint.port
        )
        return wire

    async def _ready(self, wire: _Wire) -> None:
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
