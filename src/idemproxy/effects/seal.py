"""The seal of the proxy's own compensations: they alone pass an agent's pause.

The compensation sender (admin/sender.py) reaches the proxy listener as an agent does, so that
each compensation is claimed and recorded like any effect; ``Idem-Compensates`` marks it as
one, to be sent while the agent is paused and not counted toward a pause. An agent could send
that header too, so ``Idem-Compensation-Seal`` proves where it came from: an HMAC-SHA256, under
a secret this serving process made at start and never shows, of the request's method, target,
body and compensated key. The agent shares the listener and even loopback, but not the process,
so it can neither read the secret nor make a seal; and a seal it overheard would be good for
that one request alone, which the store then replays instead of sending.

Workers get the secret by forking from the process that made it (workers.py), so a
compensation that one worker's admin API sends passes on whichever worker's listener it lands.
A request with ``Idem-Compensates`` and no good seal is refused: see :func:`forged_compensation`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from idemproxy.errors import ProblemCode, RequestRefused

SEAL_HEADER = "Idem-Compensation-Seal"
SECRET_BYTES = 32


class CompensationSeal:
    """Signs the proxy's own compensations and checks the seal of those that claim to be."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < SECRET_BYTES:
            raise ValueError(f"a seal's secret has at least {SECRET_BYTES} bytes")
        self._secret = secret

    @classmethod
    def generate(cls) -> CompensationSeal:
        return cls(secrets.token_bytes(SECRET_BYTES))

    def __repr__(self) -> str:
        return "CompensationSeal(<secret>)"

    def sign(self, method: str, target: str, compensates: str, body: bytes) -> str:
        """The seal of one request; ``target`` is its path and query as sent on the wire."""
        # Fields are joined by newlines, which none of them can hold (HTTP forbids them in the
        # request line and in header values), and the body enters as a fixed-length digest.
        message = b"\n".join(
            (
                method.upper().encode(),
                target.encode("utf-8", "surrogateescape"),
                compensates.encode("utf-8", "surrogateescape"),
                hashlib.sha256(body).hexdigest().encode(),
            )
        )
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def verifies(self, seal: str, method: str, target: str, compensates: str, body: bytes) -> bool:
        """Whether ``seal`` is this proxy's for this very request, compared in constant time."""
        expected = self.sign(method, target, compensates, body).encode()
        return hmac.compare_digest(seal.encode("utf-8", "surrogateescape"), expected)


def forged_compensation() -> RequestRefused:
    return RequestRefused(
        ProblemCode.FORGED_COMPENSATION,
        "Idem-Compensates marks the proxy's own compensations, which alone pass an agent's"
        " pause, and this request is not one of them, so nothing was sent. Send the effect"
        " without Idem-Compensates (a paused agent waits for `idemproxy agent resume`); an"
        " operator undoes a batch with `idemproxy recover AGENT BATCH --strategy compensate`",
    )
