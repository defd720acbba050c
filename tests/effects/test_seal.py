"""A compensation's seal holds for its own request alone, under its own process's secret."""

from __future__ import annotations

import pytest

from idemproxy.effects.seal import SECRET_BYTES, CompensationSeal

REQUEST = ("POST", "/discord/v10/channels/1/messages", "bot/tc:b:c", b'{"content":"undo"}')


def test_a_seal_verifies_for_its_request_and_no_other() -> None:
    seal = CompensationSeal.generate()
    signed = seal.sign(*REQUEST)

    assert seal.verifies(signed, *REQUEST)
    method, target, compensates, body = REQUEST
    assert not seal.verifies(signed, method, target, compensates, body + b" ")
    assert not seal.verifies(signed, method, target + "?x=1", compensates, body)
    assert not seal.verifies(signed, method, target, "bot/tc:b:other", body)
    assert not CompensationSeal.generate().verifies(signed, *REQUEST)


def test_the_secret_is_long_enough_and_never_shown() -> None:
    with pytest.raises(ValueError, match="at least"):
        CompensationSeal(b"short")
    seal = CompensationSeal(b"s" * SECRET_BYTES)
    assert "s" * SECRET_BYTES not in repr(seal)
