"""Bluesky (AT Protocol): repository writes are reconciled by reading their records back.

A record key is unique in a repository, so every create the agent leaves without one
(``createRecord``, and each create in ``applyWrites``) gets a TID derived from the effect: its
time is when the effect's first attempt was claimed, so posts list in the order they were made,
and every repeat of the effect sends the same key. A second create under it fails (the PDS
answers 500) instead of posting twice, and ``com.atproto.repo.getRecord`` of each key the
request writes tells whether it took effect (bluesky_writes.py says how). A 5xx to a write
therefore means "read it back", not "failed". ``uploadBlob`` is content-addressed: sending the
same bytes again makes the same blob, so its unknown outcome is reconciled by sending it again.

Session and account calls return a DID document whose PDS endpoint the client switches to; the
adapter points it back at the proxy so later calls stay protected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

import orjson

from idemproxy.policies.adapters import tid
from idemproxy.policies.adapters.base import (
    Adapter,
    Answer,
    Attempt,
    Finding,
    Found,
    Outgoing,
    Plan,
    ReadBack,
    is_json,
    key_digest,
    method_of,
)
from idemproxy.policies.adapters.bluesky_writes import (
    APPLY_WRITES,
    Judged,
    Kind,
    Write,
    combined,
    json_object,
    judge,
    writes_of,
)
from idemproxy.policies.kinds import AdapterName

UPLOAD_BLOB = "com.atproto.repo.uploadBlob"
_GET_RECORD = "com.atproto.repo.getRecord"
_SESSION_METHODS = (
    "com.atproto.server.createSession",
    "com.atproto.server.refreshSession",
    "com.atproto.server.getSession",
    "com.atproto.server.createAccount",
)
_PDS_SERVICE_ID = "#atproto_pds"
_PDS_SERVICE_TYPE = "AtprotoPersonalDataServer"
# Keys made by earlier versions took their time from the key's digest (2023-01-01 plus 46 bits
# of microseconds). An effect they left unknown is read back under that key too.
_DIGEST_TID_EPOCH_US = 1_672_531_200 * 1_000_000
_DIGEST_TID_SPAN_BITS = 46


def derived_tid(effect_key: str, first_attempt_ms: int, write: int = 0) -> str:
    """The record key of the ``write``-th create of an effect whose first attempt was claimed at
    ``first_attempt_ms``: near that time, in the order of the writes, the same for every repeat.

    The sub-millisecond part and the clock id come from the effect key, so two effects claimed
    in the same millisecond still get different keys (but for one chance in about a million).
    """
    digest = key_digest(effect_key)
    offset_us = int.from_bytes(digest[:2], "big") % 1000
    clock_id = int.from_bytes(digest[2:4], "big")
    return tid.encode(first_attempt_ms * 1000 + offset_us + write, clock_id)


def digest_tid(effect_key: str) -> str:
    """The record key earlier versions derived for ``effect_key``'s create."""
    digest = int.from_bytes(key_digest(effect_key)[:8], "big")
    micros = _DIGEST_TID_EPOCH_US + (digest >> (64 - _DIGEST_TID_SPAN_BITS))
    return tid.encode(micros, digest & 0x3FF)


class BlueskyAdapter(Adapter):
    name = AdapterName.BLUESKY

    def outgoing(self, attempt: Attempt) -> Outgoing:
        if attempt.method == UPLOAD_BLOB:
            return Outgoing(attempt.body, native=True)  # the blob's CID is its own native key
        document = json_object(attempt.body) if is_json(attempt.content_type) else None
        writes = writes_of(attempt.method, document) if document is not None else None
        if document is None or writes is None:
            return Outgoing(attempt.body)
        creates = [w for w in writes if w.kind is Kind.CREATE and not w.rkey]
        for index, write in enumerate(creates):
            # The agent's own record key (if it chose one) is just as good for a read-back.
            rkey = derived_tid(attempt.effect_key, attempt.first_attempt_ms, index)
            _set_rkey(document, write, rkey)
        body = orjson.dumps(document) if creates else attempt.body
        return Outgoing(body, native=True)

    def plan(self, path: str, age_ms: int) -> Plan:
        if method_of(path) == UPLOAD_BLOB:
            return Plan.RESEND
        return Plan.READ_BACK

    def read_back(self, attempt: Attempt, sent: Outgoing) -> tuple[ReadBack, ...]:
        writes = _sent_writes(attempt, sent)
        if not writes:
            return ()
        base = attempt.path.rsplit("/", 1)[0]
        reads = [_get_record(base, w.repo, w.collection, w.rkey) for w in writes]
        if _legacy_key(attempt):
            write = writes[0]
            earlier = digest_tid(attempt.effect_key)
            reads.append(_get_record(base, write.repo, write.collection, earlier))
        return tuple(reads)

    def finding(self, attempt: Attempt, sent: Outgoing, answers: Sequence[Answer]) -> Finding:
        writes = _sent_writes(attempt, sent)
        document = json_object(sent.body)
        if not writes or document is None or len(answers) < len(writes):
            return Finding(Found.UNSURE)
        volatile = attempt.volatile_fields
        judged = [judge(w, a, document, volatile) for w, a in zip(writes, answers, strict=False)]
        if _legacy_key(attempt) and judged[0].found is Found.ABSENT and len(answers) > 1:
            legacy = _with_rkey(writes[0], digest_tid(attempt.effect_key))
            earlier = judge(legacy, answers[1], document, volatile)
            if earlier.found is not Found.ABSENT:
                judged = [earlier]
        found = combined(judged)
        details = "; ".join(j.detail for j in judged if j.detail)
        if found is not Found.PRESENT:
            return Finding(found, detail=details)
        answer = _answer(attempt.method, writes, judged)
        uri = next((j.result["uri"] for j in judged if j.result and "uri" in j.result), "")
        return Finding(Found.PRESENT, orjson.dumps(answer), external_id=uri or _uri(writes[0]))

    def reconciles_answer(self, path: str, status: int) -> bool:
        return status >= 500 and method_of(path) != UPLOAD_BLOB

    def rewrites_session(self, path: str) -> bool:
        return path.rstrip("/").endswith(_SESSION_METHODS)

    def rewrite_session(self, body: bytes, proxy_base_url: str) -> bytes:
        document = json_object(body)
        did_doc = document.get("didDoc") if document else None
        services = did_doc.get("service") if isinstance(did_doc, dict) else None
        if not isinstance(services, list):
            return body
        for service in services:
            if isinstance(service, dict) and _is_pds(service):
                service["serviceEndpoint"] = proxy_base_url
        return orjson.dumps(document)


def _sent_writes(attempt: Attempt, sent: Outgoing) -> list[Write]:
    document = json_object(sent.body) if sent.native else None
    if document is None:
        return []
    return writes_of(attempt.method, document) or []


def _legacy_key(attempt: Attempt) -> bool:
    """True for a create whose key earlier versions would have derived differently."""
    if attempt.method != "com.atproto.repo.createRecord":
        return False
    document = json_object(attempt.body)
    return document is not None and not document.get("rkey")


def _set_rkey(document: dict[str, Any], write: Write, rkey: str) -> None:
    target = document if write.at == ("record",) else document["writes"][write.at[1]]
    target["rkey"] = rkey


def _with_rkey(write: Write, rkey: str) -> Write:
    return Write(write.kind, write.repo, write.collection, rkey, write.at)


def _get_record(base: str, repo: str, collection: str, rkey: str) -> ReadBack:
    query = urlencode({"repo": repo, "collection": collection, "rkey": rkey})
    return ReadBack(f"{base}/{_GET_RECORD}?{query}")


def _uri(write: Write) -> str:
    return f"at://{write.repo}/{write.collection}/{write.rkey}"


def _answer(method: str, writes: list[Write], judged: list[Judged]) -> dict[str, Any]:
    """What a repeat replays: the parts of the PDS's answer the read-back proves.

    ``commit`` (the repository revision the write made) and ``validationStatus`` are not in a
    getRecord answer; both are optional in the lexicons, so a client takes the answer without.
    """
    if method != APPLY_WRITES:
        return judged[0].result or {}
    results = [
        {"$type": f"{APPLY_WRITES}#{write.kind}Result", **(j.result or {})}
        for write, j in zip(writes, judged, strict=True)
    ]
    return {"results": results}


def _is_pds(service: dict[str, Any]) -> bool:
    service_id = service.get("id")
    return (
        isinstance(service_id, str)
        and service_id.endswith(_PDS_SERVICE_ID)
        and service.get("type") == _PDS_SERVICE_TYPE
    )
