"""Redis connections that pack commands in C (hiredis) instead of in Python.

redis-py's asyncio connection packs a command argument by argument in Python. A claim or a
settle is a Lua script call of some 25 arguments, and packing one took 40 us on the bench VM,
more than the rest of the Redis client's work for it; hiredis's ``pack_command`` (the packer
redis-py's synchronous client uses) writes the same bytes in 6 us. Without hiredis installed
(it comes with the ``fast`` extra), or for an argument hiredis does not take, redis-py packs as
before, so its errors for bad arguments stay the same.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection

hiredis: ModuleType | None
try:
    import hiredis
except ImportError:  # the fast extra is optional
    hiredis = None


class _HiredisPacking(AbstractConnection):
    def pack_command(self, *args: Any) -> list[bytes]:
        if hiredis is None:
            return super().pack_command(*args)
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


class PackedConnection(_HiredisPacking, Connection):
    """A plain TCP connection (``redis://``)."""


class PackedSSLConnection(_HiredisPacking, SSLConnection):
    """A TLS connection (``rediss://``)."""


def packed(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """The class packing in C that stands for ``connection_class``, or that class unchanged."""
    replacements: dict[type[AbstractConnection], type[AbstractConnection]] = {
        Connection: PackedConnection,
        SSLConnection: PackedSSLConnection,
    }
    return replacements.get(connection_class, connection_class)
