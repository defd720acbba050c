"""The pipelined connection itself (:mod:`.pipeline`): an asyncio protocol on hiredis.

It writes the commands of one loop turn in one write and hands each reply that arrives to the
oldest command waiting, since Redis answers a connection's commands in order. One timer, set
for the oldest command waiting, watches that replies keep coming.
"""

from __future__ import annotations

import asyncio
import collections
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


class Wire(asyncio.Protocol):
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
