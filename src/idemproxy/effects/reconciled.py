"""What reconciling an unknown outcome came to, as the claim loop acts on it."""

from __future__ import annotations

from dataclasses import dataclass

from idemproxy.store.records import EffectRecord


@dataclass(frozen=True, slots=True)
class Completed:
    """The effect is done: replay its record."""

    record: EffectRecord


@dataclass(frozen=True, slots=True)
class ClaimAgain:
    """The key is free (or another repeat resolved it first, and its result stands): claim
    again, and the claim says what to do."""


@dataclass(frozen=True, slots=True)
class Review:
    """Nothing proves the outcome either way: the record waits for an operator's review."""


Reconciliation = Completed | ClaimAgain | Review
