"""A store a proxy filled, for the operator's tables to show."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.filled import fill


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The URL of a store holding what :func:`fill` writes."""
    asyncio.run(fill(tmp_path / "effects.db"))
    return f"sqlite:///{tmp_path}/effects.db"
