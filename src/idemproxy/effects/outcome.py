"""How the proxy answered a request: the ``Idem-Outcome`` header and the metrics label."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    FORWARDED = "forwarded"
    REPLAYED = "replayed"
    COALESCED = "coalesced"
    RECONCILED = "reconciled"
    # Forwarded without protection (``on_missing_key: passthrough``); the header says forwarded.
    PASSTHROUGH = "passthrough"


def outcome_headers(outcome: Outcome, effect_key: str | None) -> dict[str, str]:
    header = Outcome.FORWARDED if outcome is Outcome.PASSTHROUGH else outcome
    headers = {"Idem-Outcome": str(header)}
    if effect_key is not None:
        headers["Idem-Key"] = effect_key
    return headers
