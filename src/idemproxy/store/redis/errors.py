"""Redis errors translated at the boundary into the store's error tree."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    TimeoutError,
    TryAgainError,
)

from idemproxy.store.errors import StoreError, StoreUnavailable

# Errors that mean "Redis cannot serve us right now" rather than "we sent something wrong".
# ConnectionError covers BusyLoadingError and Sentinel's MasterNotFoundError.
UNAVAILABLE: tuple[type[Exception], ...] = (
    ConnectionError,
    TimeoutError,
    ReadOnlyError,
    OutOfMemoryError,
    ClusterDownError,
    TryAgainError,
    RedisClusterException,
)


def raised_in_client(exc: BaseException) -> bool:
    """Whether ``exc`` came out of redis-py's own code rather than ours."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__", "").startswith("redis."):
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def translated(op: str) -> Iterator[None]:
    """Raise Redis's errors inside the block as :class:`StoreUnavailable` or :class:`StoreError`."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise StoreUnavailable(f"redis unavailable during {op}: {exc}") from exc
    except RedisError as exc:
        raise StoreError(f"redis error during {op}: {exc}") from exc
    except (AttributeError, TypeError, RuntimeError) as exc:
        # redis-py leaks these when it writes on a connection that a concurrent disconnect tore
        # down (redis/redis-py#4287; seen on Cluster failovers; RuntimeError is uvloop's
        # "the handler is closed"): the connection is gone.
        if raised_in_client(exc):
            raise StoreUnavailable(f"redis connection lost during {op}: {exc!r}") from exc
        raise
