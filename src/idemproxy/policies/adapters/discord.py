"""Discord: message create carries a ``nonce`` derived from the effect key, enforced.

With ``enforce_nonce: true`` Discord answers a second create with the same nonce, sent within a
few minutes of the first, with the message the first one made. A re-send is safe only inside
that window; after it the outcome waits for review.
"""

from __future__ import annotations

import base64

import orjson

from idemproxy.policies.adapters.base import Adapter, Outgoing, Settle, is_json, key_digest
from idemproxy.policies.model import AdapterName

NONCE_CHARS = 25  # Discord's limit for a string nonce


def discord_nonce(effect_key: str) -> str:
    return base64.b32encode(key_digest(effect_key)).decode().lower()[:NONCE_CHARS]


class DiscordAdapter(Adapter):
    name = AdapterName.DISCORD

    def outgoing(self, effect_key: str, body: bytes, content_type: str) -> Outgoing:
        # Attachments go as multipart with the JSON in a part; those sends keep the client's
        # nonce and, lacking ours, are left to review when their outcome is unknown.
        if not is_json(content_type):
            return Outgoing(body)
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return Outgoing(body)
        if not isinstance(document, dict):
            return Outgoing(body)
        document["nonce"] = discord_nonce(effect_key)
        document["enforce_nonce"] = True
        return Outgoing(orjson.dumps(document), native=True)

    def settle(self, age_ms: int) -> Settle:
        return Settle.RESEND if self.within_window(age_ms) else Settle.REVIEW
