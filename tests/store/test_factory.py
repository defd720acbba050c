"""open_store picks the backend from the URL, and explains a URL it cannot use."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from idemproxy.store.errors import InvalidStoreURL, StoreNotFound, StoreUnavailable
from idemproxy.store.factory import open_store, store_location
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore
from tests.store.conftest import free_port


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "rediss://user:secret@redis.example:6380/2",
        "redis+sentinel://10.0.0.1:26379,10.0.0.2/mymaster",
        "redis+sentinel://:secret@[::1]:26379/mymaster/3",
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7001",
        "REDIS://127.0.0.1",
    ],
)
async def test_redis_urls_open_a_redis_store_without_connecting(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, RedisStore)
    await store.close()


async def test_memory_url_opens_a_memory_store() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


async def test_relative_sqlite_path_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///data/effects.db")
    assert isinstance(store, SQLiteStore)
    await store.ping()
    await store.close()
    assert (tmp_path / "data" / "effects.db").is_file()


async def test_absolute_sqlite_path_gets_its_directory_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "effects.db"
    store = open_store(f"sqlite:///{path}")
    assert isinstance(store, SQLiteStore)
    await store.ping()
    await store.close()
    assert path.is_file()


def test_a_store_that_must_exist_is_refused_where_there_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreNotFound) as raised:
        open_store("sqlite:///typo.db", create=False)
    message = str(raised.value)
    assert f"no store at {tmp_path / 'typo.db'}" in message
    assert f"relative to the working directory {tmp_path}" in message
    assert "sqlite:////" in message  # how to write an absolute path
    assert "only `idemproxy serve` creates a store" in message
    with pytest.raises(StoreNotFound):
        open_store(f"sqlite:///{tmp_path}/no/such/dir/effects.db", create=False)
    assert list(tmp_path.iterdir()) == []


def test_a_memory_store_cannot_be_opened_from_outside_its_process() -> None:
    with pytest.raises(StoreNotFound, match="inside the process"):
        open_store("memory://", create=False)


def test_the_store_location_is_an_absolute_path_or_a_url_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_location("sqlite:///data/effects.db") == str(tmp_path / "data" / "effects.db")
    assert store_location("sqlite:////var/lib/effects.db") == "/var/lib/effects.db"
    assert store_location("rediss://user:s3cret@redis.example:6380/2") == (
        "rediss://user:***@redis.example:6380/2"
    )
    assert store_location("redis+sentinel://:s3cret@s1:26379,s2/mymaster") == (
        "redis+sentinel://:***@s1:26379,s2/mymaster"
    )
    assert store_location("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "127.0.0.1:6379",
        "postgres://db/effects",
        "sqlite://",
        "sqlite:///",
        "sqlite://host/effects.db",
        "sqlite:///effects.db?mode=ro",
        "redis://127.0.0.1:notaport",
        "redis+sentinel://127.0.0.1:26379",
        "redis+sentinel://127.0.0.1:26379/mymaster/notadb",
        "redis+sentinel://:26379/mymaster",
        "redis+cluster://127.0.0.1:7000/1",
        "redis+cluster://127.0.0.1:port",
    ],
)
def test_a_url_that_names_no_store_lists_the_valid_forms(url: str) -> None:
    with pytest.raises(InvalidStoreURL) as raised:
        open_store(url)
    message = str(raised.value)
    assert repr(url) in message
    for form in ("redis://", "rediss://", "redis+sentinel://", "redis+cluster://", "memory://"):
        assert form in message
    assert "sqlite:///relative" in message
    assert "sqlite:////absolute" in message
    assert "e.g." in message


async def test_a_store_that_is_down_opens_and_reports_itself_unavailable() -> None:
    store: Store = open_store(f"redis://127.0.0.1:{free_port()}/0")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await store.ping()
    assert time.monotonic() - started < 3
    await store.close()
