"""One call for a controller's handler: check the signature, then parse the body."""

from __future__ import annotations

from idemproxy_events.events import Delivery, MalformedDelivery, parse_delivery
from idemproxy_events.signature import Headers, verify


class RejectedDelivery(Exception):
    """A POST a controller must refuse, with the status to answer it with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def receive(secret: str, headers: Headers, body: bytes, now_s: float | None = None) -> Delivery:
    """The delivery in a POST, or :class:`RejectedDelivery`: 401 when the signature is wrong
    or stale (the proxy retries, then parks the agent's delivery), 400 when the signed body is
    no delivery. Answer 2xx only once the events are stored: that moves the proxy's cursor."""
    if not verify(secret, headers, body, now_s):
        raise RejectedDelivery(401, "bad or stale Idem-Signature: check controller.secret")
    try:
        return parse_delivery(body)
    except MalformedDelivery as exc:
        raise RejectedDelivery(400, str(exc)) from exc
