"""AT Protocol TIDs: the time-ordered record keys of posts and most other records.

A TID is 64 bits, written as 13 characters of a sortable base32: the top bit 0, 53 bits of
microseconds since 1970, and 10 bits of clock id. Sorting TIDs as strings sorts them by time,
which is how ``listRecords`` and every client list a repository's posts.
"""

from __future__ import annotations

ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
CHARS = 13
CLOCK_ID_BITS = 10
_CLOCK_ID_MASK = (1 << CLOCK_ID_BITS) - 1


def encode(micros: int, clock_id: int) -> str:
    value = (micros << CLOCK_ID_BITS) | (clock_id & _CLOCK_ID_MASK)
    chars = [ALPHABET[(value >> (5 * shift)) & 31] for shift in range(CHARS)]
    return "".join(reversed(chars))


def micros_of(tid: str) -> int:
    """The time a TID names, in microseconds since 1970."""
    value = 0
    for char in tid:
        value = (value << 5) | ALPHABET.index(char)
    return value >> CLOCK_ID_BITS
