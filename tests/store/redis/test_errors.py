"""Redis client failures reach the proxy as the store's own errors, whatever their type."""

from __future__ import annotations

import asyncio

import pytest
import uvloop
from redis.asyncio import Connection

from idemproxy.store.errors import StoreUnavailable
from idemproxy.store.redis.errors import translated


async def test_a_write_on_a_torn_down_connection_is_reported_unavailable() -> None:
    # The state a concurrent disconnect leaves a pooled connection in during a Cluster failover:
    # redis-py then raises AttributeError, not ConnectionError (redis/redis-py#4287).
    connection = Connection(host="127.0.0.1", port=6379)
    lost = pytest.raises(StoreUnavailable, match="connection lost during claim")
    with lost, translated("claim"):
        await connection._send_packed_command([b"*1\r\n$4\r\nPING\r\n"])


@pytest.mark.redis
def test_a_write_on_a_closed_uvloop_transport_is_reported_unavailable() -> None:
    # On uvloop the same race surfaces as RuntimeError("... the handler is closed").
    async def write_after_close() -> None:
        connection = Connection(host="127.0.0.1", port=6379)
        await connection.connect()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        try:
            assert connection._writer is not None
            connection._writer.transport.close()
            await asyncio.sleep(0)  # the handle closes on the loop's next turn
            with translated("settle"):
                await connection._send_packed_command([b"*1\r\n$4\r\nPING\r\n"])
        finally:
            await connection.disconnect()

    loop = uvloop.new_event_loop()
    try:
        with pytest.raises(StoreUnavailable, match="connection lost during settle"):
            loop.run_until_complete(write_after_close())
    finally:
        loop.close()


async def test_our_own_attribute_errors_are_not_mistaken_for_an_outage() -> None:
    with pytest.raises(AttributeError, match="ours"), translated("claim"):
        raise AttributeError("ours")
