"""Bluesky (AT Protocol): createRecord gets a record key (a TID) derived from the effect key.

A record key is unique in a repository, so a second create under it fails (the PDS answers 500)
instead of posting twice, and ``com.atproto.repo.getRecord`` tells whether the create took
effect: found means applied, ``RecordNotFound`` means not applied. A 500 to a create that
carried our key therefore means "read it back", not "failed".

Session calls return a DID document whose PDS endpoint the client switches to; the adapter
points it back at the proxy so later calls stay protected.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson

from idemproxy.policies.adapters.base import (
    Adapter,
    Found,
    Outgoing,
    ReadBack,
    Settle,
    Verdict,
    is_json,
    key_digest,
)
from idemproxy.policies.model import AdapterName

_TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
_TID_CHARS = 13
# A TID is 53 bits of microseconds since 1970 and 10 bits of clock id. Ours take their time
# from the key's digest, placed in the ~2.2 years after 2023-01-01: in the past, never ahead.
_TID_EPOCH_US = 1_672_531_200 * 1_000_000
_TID_SPAN_BITS = 46
_SESSION_METHODS = (
    "com.atproto.server.createSession",
    "com.atproto.server.refreshSession",
    "com.atproto.server.getSession",
)
_PDS_SERVICE_ID = "#atproto_pds"
_PDS_SERVICE_TYPE = "AtprotoPersonalDataServer"


def derived_tid(effect_key: str) -> str:
    """A valid TID record key that is the same for every attempt of one effect."""
    digest = int.from_bytes(key_digest(effect_key)[:8], "big")
    micros = _TID_EPOCH_US + (digest >> (64 - _TID_SPAN_BITS))
    clock_id = digest & 0x3FF
    value = (micros << 10) | clock_id
    chars = [_TID_ALPHABET[(value >> (5 * shift)) & 31] for shift in range(_TID_CHARS)]
    return "".join(reversed(chars))


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


class BlueskyAdapter(Adapter):
    name = AdapterName.BLUESKY

    def outgoing(self, effect_key: str, body: bytes, content_type: str) -> Outgoing:
        document = _json_object(body) if is_json(content_type) else None
        if document is None or not {"repo", "collection"} <= document.keys():
            return Outgoing(body)
        if not document.get("rkey"):
            # The agent's own record key (if it chose one) is just as good for a read-back.
            document["rkey"] = derived_tid(effect_key)
            body = orjson.dumps(document)
        return Outgoing(body, native=True)

    def settle(self, age_ms: int) -> Settle:
        return Settle.READ_BACK

    def read_back(self, path: str, sent: Outgoing) -> ReadBack | None:
        document = _json_object(sent.body)
        if not sent.native or document is None:
            return None
        query = urlencode({part: document[part] for part in ("repo", "collection", "rkey")})
        base = path.rsplit("/", 1)[0]
        return ReadBack(f"{base}/com.atproto.repo.getRecord?{query}")

    def verdict(self, status: int, body: bytes) -> Verdict:
        document = _json_object(body) or {}
        if status == 200 and isinstance(document.get("uri"), str):
            created = {"uri": document["uri"], "cid": document.get("cid")}
            return Verdict(Found.PRESENT, orjson.dumps(created), external_id=document["uri"])
        if status in (400, 404) and document.get("error") == "RecordNotFound":
            return Verdict(Found.ABSENT)
        return Verdict(Found.UNSURE)

    def verifies(self, status: int) -> bool:
        return status >= 500

    def rewrites_session(self, path: str) -> bool:
        return path.rstrip("/").endswith(_SESSION_METHODS)

    def rewrite_session(self, body: bytes, proxy_base_url: str) -> bytes:
        document = _json_object(body)
        did_doc = document.get("didDoc") if document else None
        services = did_doc.get("service") if isinstance(did_doc, dict) else None
        if not isinstance(services, list):
            return body
        for service in services:
            if isinstance(service, dict) and _is_pds(service):
                service["serviceEndpoint"] = proxy_base_url
        return orjson.dumps(document)


def _is_pds(service: dict[str, Any]) -> bool:
    service_id = service.get("id")
    return (
        isinstance(service_id, str)
        and service_id.endswith(_PDS_SERVICE_ID)
        and service.get("type") == _PDS_SERVICE_TYPE
    )
