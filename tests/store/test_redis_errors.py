"""Redis client failures reach the proxy as the store's own errors, whatever their type."""

from __future__ import annotations

import pytest
from redis.asyncio import Connection

from idemproxy.store.base import StoreUnavailable
from idemproxy.store.redis_errors import translated


async def test_a_write_on_a_torn_down_connection_is_reported_unavailable() -> None:
    # The state a concurrent disconnect leaves a pooled connection in during a Cluster failover:
    # redis-py then raises AttributeError, not ConnectionError (redis/redis-py#4287).
    connection = Connection(host="127.0.0.1", port=6379)
    lost = pytest.raises(StoreUnavailable, match="connection lost during claim")
    with lost, translated("claim"):
        await connection._send_packed_command([b"*1\r\n$4\r\nPING\r\n"])


async def test_our_own_attribute_errors_are_not_mistaken_for_an_outage() -> None:
    with pytest.raises(AttributeError, match="ours"), translated("claim"):
        raise AttributeError("ours")
