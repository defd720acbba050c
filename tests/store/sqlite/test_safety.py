"""The SQLite store's marker when its file is replaced or deleted under a running proxy."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from idemproxy.store.records import RecordKey
from idemproxy.store.safety import LossKind
from idemproxy.store.sqlite import SQLiteStore
from tests.store.test_contract import claim_request, completed


def replace_with_an_empty_one(path: Path) -> None:
    """A blank file renamed over it (a volume restored empty, a careless deploy)."""
    blank = path.with_name("blank.db")
    sqlite3.connect(blank).close()
    os.replace(blank, path)


def delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


@pytest.mark.parametrize("lose", [replace_with_an_empty_one, delete])
async def test_a_file_replaced_or_deleted_under_the_store_is_a_loss(
    tmp_path: Path, lose: Callable[[Path], None]
) -> None:
    path = tmp_path / "effects.db"
    store = SQLiteStore(path)
    try:
        seen = (await store.check_marker(None)).marker
        key = RecordKey("bot", "e1")
        await store.claim(claim_request(key))
        await store.settle(key, 1, completed())
        lose(path)

        found = await store.check_marker(seen)

        assert found.loss is not None
        assert found.loss.kind is LossKind.MARKER_GONE
        # The store now works on the file at its path, where every other process looks.
        assert await store.get(key) is None
        other = SQLiteStore(path)
        assert (await other.check_marker(None)).loss == found.loss
        await other.close()
    finally:
        await store.close()
