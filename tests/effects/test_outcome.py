"""The Idem-Outcome header: passthrough is shown as forwarded, and the key rides along."""

from __future__ import annotations

from idemproxy.effects.outcome import Outcome, outcome_headers


def test_an_unprotected_forward_says_forwarded() -> None:
    assert outcome_headers(Outcome.PASSTHROUGH, None) == {"Idem-Outcome": "forwarded"}


def test_an_effect_names_its_key() -> None:
    assert outcome_headers(Outcome.REPLAYED, "bot/tc:b:c") == {
        "Idem-Outcome": "replayed",
        "Idem-Key": "bot/tc:b:c",
    }
