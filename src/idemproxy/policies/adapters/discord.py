"""Discord: message create carries a ``nonce`` derived from the effect key, enforced.

The nonce goes into the JSON body, or into the ``payload_json`` part of a multipart send (one
with attachments). With ``enforce_nonce: true`` Discord answers a second create with the same
nonce, sent within a few minutes of the first, with the message the first one made. A re-send is
safe only inside that window; after it the outcome waits for review.
"""

from __future__ import annotations

import base64

import orjson

from idemproxy import multipart
from idemproxy.policies.adapters.base import (
    Adapter,
    Attempt,
    Outgoing,
    Plan,
    is_json,
    key_digest,
)
from idemproxy.policies.kinds import AdapterName

NONCE_CHARS = 25  # Discord's limit for a string nonce
PAYLOAD_PART = "payload_json"


def _with_nonce(payload: bytes, nonce: str) -> bytes | None:
    """The message JSON carrying ``nonce``, enforced; None when it is not a JSON object."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    document["nonce"] = nonce
    document["enforce_nonce"] = True
    return orjson.dumps(document)


def discord_nonce(effect_key: str) -> str:
    return base64.b32encode(key_digest(effect_key)).decode().lower()[:NONCE_CHARS]


class DiscordAdapter(Adapter):
    name = AdapterName.DISCORD

    def outgoing(self, attempt: Attempt) -> Outgoing:
        body, content_type = attempt.body, attempt.content_type
        nonce = discord_nonce(attempt.effect_key)
        if is_json(content_type):
            payload = _with_nonce(body, nonce)
            return Outgoing(body) if payload is None else Outgoing(payload, native=True)
        # Sends with attachments are multipart, the message's JSON in the payload_json part.
        boundary = multipart.boundary_of(content_type)
        if boundary is None:
            return Outgoing(body)
        for part in multipart.parse(body, boundary) or ():
            if part.name != PAYLOAD_PART:
                continue
            payload = _with_nonce(part.content, nonce)
            sent = None if payload is None else multipart.replaced(body, boundary, part, payload)
            return Outgoing(body) if sent is None else Outgoing(sent, native=True)
        return Outgoing(body)

    def plan(self, path: str, age_ms: int) -> Plan:
        return Plan.RESEND if self.within_window(age_ms) else Plan.REVIEW
