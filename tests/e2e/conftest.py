"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import FakeUpstream, running


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[FakeUpstream]:
    """The fake upstream as a process of its own, counting the effects it receives."""
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        yield upstream
