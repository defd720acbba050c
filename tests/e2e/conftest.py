"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import FakeUpstream, RedisServer, running


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[FakeUpstream]:
    """The fake upstream as a process of its own, counting the effects it receives."""
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        yield upstream


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each durable store in turn: a SQLite file, and a private redis-server of the test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/s.db"
        return
    redis_server = RedisServer(tmp_path)
    with running(redis_server):
        yield redis_server.url
