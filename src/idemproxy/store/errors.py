"""The errors every store backend raises, whatever it is built on.

Backends translate their own errors at the boundary into this tree, chained with ``from``::

    StoreError
     +-- StoreUnavailable      the store cannot be reached or did not answer in time
     +-- StoreCorrupt          a record could not be decoded (never silently dropped)
     +-- StoreNotFound         a store that must already exist (the CLI's) is not there
     +-- InvalidStoreURL       a store URL that names no backend or is malformed
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error a store raises."""


class StoreUnavailable(StoreError):
    """The store is down or unreachable; callers fail closed on effectful routes."""


class StoreCorrupt(StoreError):
    """A stored record or event could not be decoded."""


class StoreNotFound(StoreError):
    """No store where one must already be: only ``idemproxy serve`` makes a store, so a
    command that reads or settles records refuses a path a proxy never used (a typo)."""


class InvalidStoreURL(StoreError, ValueError):
    """A store URL that cannot be opened; the message says what a valid one looks like."""
