"""Verify and parse the effect events idemproxy delivers to a recovery controller.

Standard library only, so a controller does not install the proxy::

    from idemproxy_events import RejectedDelivery, receive

    try:
        delivery = receive(secret, request_headers, raw_body)
    except RejectedDelivery as rejected:
        ...  # answer rejected.status
    for event in delivery.events:  # oldest first; deduplicate by (agent, event_id)
        ...

``examples/recovery_controller.py`` in the idemproxy repository is a whole controller on
``http.server`` and ``sqlite3``.
"""

from idemproxy_events.events import (
    Delivery,
    Event,
    EventType,
    MalformedDelivery,
    parse_delivery,
    parse_event,
)
from idemproxy_events.receive import RejectedDelivery, receive
from idemproxy_events.signature import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Headers,
    signature,
    signed_headers,
    verify,
)

__version__ = "0.1.0"

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Delivery",
    "Event",
    "EventType",
    "Headers",
    "MalformedDelivery",
    "RejectedDelivery",
    "parse_delivery",
    "parse_event",
    "receive",
    "signature",
    "signed_headers",
    "verify",
]
