"""The SQLite backend: the embedded default, durable without a server."""

from idemproxy.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
