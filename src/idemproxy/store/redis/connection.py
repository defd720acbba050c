"""Pooled Redis connections that do less work per command than redis-py's own.

Two costs of redis-py's asyncio connection stood out in profiles of a busy proxy, whose claims
and settles are Lua script calls of some 25 arguments each:

- It packs a command argument by argument in Python, where hiredis's ``pack_command`` (the
  packer redis-py's synchronous client uses) writes the same bytes in C, several times faster
  (docs/performance.md, "Redis store", has the figures). For an argument hiredis does not
  take, redis-py packs as before, so its errors for bad arguments stay.
- With a socket timeout set, it bounds every write with ``asyncio.wait_for``, which on Python
  3.11 runs the write in a task of its own: a task and an extra turn of the event loop per
  command. But a small command on an open connection cannot wait: the reply to the command
  before it emptied the socket buffer, and asyncio's ``drain()`` returns at once below the
  transport's 64 KiB high-water mark. Such a write goes straight to the socket; a larger one,
  or one that first has to connect, is bounded as before. Reads keep their timeout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection

# Well below the 64 KiB at which an asyncio transport makes drain() wait.
NEVER_WAITING_WRITE_BYTES = 16 * 1024


class _CheaperCommands(AbstractConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        # A command name of several words ('SCRIPT LOAD') goes as several arguments, as
        # redis-py sends it.
        name = args[0]
        if isinstance(name, str):
            args = (*name.encode().split(), *args[1:])
        elif isinstance(name, bytes) and b" " in name:
            args = (*name.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # bool, None, bytearray...: redis-py's own packer says what is wrong
            return super().pack_command(*args)

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        timeout_s = self.socket_timeout
        small = isinstance(command, list) and _length(command) < NEVER_WAITING_WRITE_BYTES
        if not (timeout_s and small and self.is_connected):
            await super().send_packed_command(command, check_health)
            return
        # redis-py skips wait_for without a socket timeout. Nothing else runs on the loop until
        # the write returns, so no read of this connection sees the timeout missing.
        self.socket_timeout = None
        try:
            await super().send_packed_command(command, check_health)
        finally:
            self.socket_timeout = timeout_s


def _length(chunks: list[Any]) -> int:
    return sum(len(chunk) for chunk in chunks)


class CheaperConnection(_CheaperCommands, Connection):
    """A plain TCP connection (``redis://``)."""


class CheaperSSLConnection(_CheaperCommands, SSLConnection):
    """A TLS connection (``rediss://``)."""


def cheaper(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """The cheaper class that stands for ``connection_class``, or that class unchanged."""
    replacements: dict[type[AbstractConnection], type[AbstractConnection]] = {
        Connection: CheaperConnection,
        SSLConnection: CheaperSSLConnection,
    }
    return replacements.get(connection_class, connection_class)
