"""Stored response headers: the one encoding every backend writes to disk.

The Redis and SQLite stores keep a response's headers as an orjson list of ``[name, value]``
pairs (:func:`dump_headers`), so a record reads back the same whichever store wrote it.
"""

from __future__ import annotations

import orjson


def dump_headers(headers: tuple[tuple[str, str], ...]) -> bytes:
    """Serialize response headers so that any ``str`` comes back exactly.

    aiohttp decodes header bytes as UTF-8 with ``surrogateescape``, so a value may hold lone
    surrogates, which JSON cannot carry. Each string is therefore stored as its UTF-8
    (``surrogatepass``) bytes read as latin-1: identical for ASCII, reversible for everything.
    """
    return orjson.dumps([[_to_latin1(name), _to_latin1(value)] for name, value in headers])


def load_headers(data: bytes) -> tuple[tuple[str, str], ...]:
    """The inverse of :func:`dump_headers`; raises ``ValueError`` on anything else."""
    pairs = orjson.loads(data)
    if not isinstance(pairs, list):
        raise ValueError("stored headers are not a list")
    return tuple((_from_latin1(name), _from_latin1(value)) for name, value in pairs)


def _to_latin1(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def _from_latin1(text: object) -> str:
    if not isinstance(text, str):
        raise ValueError("stored header is not a string")
    return text.encode("latin-1").decode("utf-8", "surrogatepass")
