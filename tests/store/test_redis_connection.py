"""Commands packed by hiredis are byte for byte what redis-py's own packer sends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from idemproxy.store import redis_packing
from idemproxy.store.redis_client import clients_from_url
from idemproxy.store.redis_packing import PackedConnection, PackedSSLConnection, packed

pytest.importorskip("hiredis")

ARGUMENTS = st.one_of(
    st.text(),
    st.binary(),
    st.binary().map(bytearray),  # not hiredis's: redis-py packs it
    st.integers(),
    st.floats(allow_nan=False),
)
NAMES = st.sampled_from(["EVALSHA", "SET", "SCRIPT LOAD", "CLIENT SETINFO", b"HGETALL", b"X Y"])


def python_packed(*args: Any) -> bytes:
    return b"".join(Connection().pack_command(*args))


def hiredis_packed(*args: Any) -> bytes:
    return b"".join(PackedConnection().pack_command(*args))


@given(NAMES, st.lists(ARGUMENTS, max_size=30))
def test_every_command_packs_to_the_same_bytes(name: str | bytes, arguments: list[object]) -> None:
    assert hiredis_packed(name, *arguments) == python_packed(name, *arguments)


@pytest.mark.parametrize("bad", [True, None])
def test_an_argument_redis_refuses_is_refused_the_same_way(bad: object) -> None:
    with pytest.raises(DataError) as ours:
        hiredis_packed("SET", "key", bad)
    with pytest.raises(DataError) as theirs:
        python_packed("SET", "key", bad)
    assert str(ours.value) == str(theirs.value)


def test_without_hiredis_redis_py_packs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_packing, "hiredis", None)
    assert hiredis_packed("SET", "key", "ü", 7) == python_packed("SET", "key", "ü", 7)


def test_store_clients_use_the_packing_connections() -> None:
    for url, expected in (
        ("redis://127.0.0.1:6379/0", PackedConnection),
        ("rediss://127.0.0.1:6380/0", PackedSSLConnection),
    ):
        client, _ = clients_from_url(url)
        assert client.connection_pool.connection_class is expected  # type: ignore[union-attr]
    assert packed(SSLConnection) is PackedSSLConnection
    assert packed(UnixDomainSocketConnection) is UnixDomainSocketConnection
