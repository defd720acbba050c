"""The in-process backend for tests and demos: the reference semantics."""

from idemproxy.store.memory.store import MemoryStore

__all__ = ["MemoryStore"]
