"""Calls made straight on the PDS, never through the proxy: the ground truth the tests check.

What the agent was told comes through the proxy; what really happened is read here, from the
PDS's own repository (``listRecords``, ``getRecord``), so a test that the proxy fooled fails.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson

from tests.support.pds import PASSWORD

CREATE_RECORD = "com.atproto.repo.createRecord"
PUT_RECORD = "com.atproto.repo.putRecord"
DELETE_RECORD = "com.atproto.repo.deleteRecord"
APPLY_WRITES = "com.atproto.repo.applyWrites"
UPLOAD_BLOB = "com.atproto.repo.uploadBlob"
CREATE_SESSION = "com.atproto.server.createSession"
CREATE_ACCOUNT = "com.atproto.server.createAccount"
POST = "app.bsky.feed.post"
PROFILE = "app.bsky.actor.profile"
TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
TID_CHARS = 13
_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Account:
    handle: str
    did: str
    password: str
    access_jwt: str

    @property
    def authorization(self) -> str:
        return f"Bearer {self.access_jwt}"


@dataclass(frozen=True)
class XrpcAnswer:
    status: int
    document: dict[str, Any]


def call(
    base_url: str,
    method: str,
    *,
    body: dict[str, Any] | None = None,
    query: dict[str, str] | None = None,
    token: str | None = None,
    data: bytes | None = None,
    content_type: str = "application/json",
) -> XrpcAnswer:
    """One XRPC call: a procedure (POST) when it has a body, else a query (GET)."""
    url = f"{base_url}/xrpc/{method}" + (f"?{urlencode(query)}" if query else "")
    payload = orjson.dumps(body) if body is not None else data
    headers = {"Content-Type": content_type} if payload is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, payload, headers, method="POST" if payload else "GET")
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
            status, raw = int(answer.status), answer.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
        error.close()
    document = orjson.loads(raw) if raw else {}
    assert isinstance(document, dict), raw
    return XrpcAnswer(status, document)


def ok(answer: XrpcAnswer) -> dict[str, Any]:
    assert answer.status == 200, answer
    return answer.document


def unique_handle(prefix: str = "agent") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}.test"


def account_body(handle: str) -> dict[str, Any]:
    return {"handle": handle, "email": f"{handle}@example.test", "password": PASSWORD}


def create_account(pds_url: str, prefix: str = "agent") -> Account:
    """A fresh account, made on the PDS itself: each test counts records in its own repo."""
    handle = unique_handle(prefix)
    made = ok(call(pds_url, CREATE_ACCOUNT, body=account_body(handle)))
    return Account(handle, made["did"], PASSWORD, made["accessJwt"])


def create_record(
    pds_url: str,
    account: Account,
    collection: str,
    record: dict[str, Any],
    rkey: str | None = None,
) -> dict[str, Any]:
    """A record made on the PDS behind the proxy's back (by another client of the account)."""
    body: dict[str, Any] = {"repo": account.did, "collection": collection, "record": record}
    if rkey is not None:
        body["rkey"] = rkey
    return ok(call(pds_url, CREATE_RECORD, body=body, token=account.access_jwt))


def upload_blob(pds_url: str, account: Account, data: bytes, content_type: str) -> dict[str, Any]:
    answer = call(
        pds_url, UPLOAD_BLOB, data=data, content_type=content_type, token=account.access_jwt
    )
    blob: dict[str, Any] = ok(answer)["blob"]
    return blob


def records(pds_url: str, did: str, collection: str = POST) -> list[dict[str, Any]]:
    """Every record of ``collection``, in record-key order (oldest TID first)."""
    found: list[dict[str, Any]] = []
    query = {"repo": did, "collection": collection, "limit": "100", "reverse": "true"}
    while True:
        page = ok(call(pds_url, "com.atproto.repo.listRecords", query=query))
        found.extend(page["records"])
        if not page["records"] or "cursor" not in page:
            return found
        query["cursor"] = page["cursor"]


def get_record(pds_url: str, did: str, collection: str, rkey: str) -> dict[str, Any] | None:
    """The record's value, or None when the PDS has no such record."""
    query = {"repo": did, "collection": collection, "rkey": rkey}
    answer = call(pds_url, "com.atproto.repo.getRecord", query=query)
    if answer.status == 400 and answer.document.get("error") == "RecordNotFound":
        return None
    value: dict[str, Any] = ok(answer)["value"]
    return value


def rkey_of(uri: str) -> str:
    """The record key of an ``at://repo/collection/rkey`` URI."""
    return uri.rsplit("/", 1)[1]


def tid_time(tid: str) -> datetime:
    """When a TID says it was made: 13 base32-sortable characters, 53 bits of microseconds
    since 1970 above 10 bits of clock id."""
    assert len(tid) == TID_CHARS, f"not a TID: {tid!r}"
    assert set(tid) <= set(TID_ALPHABET), f"not a TID: {tid!r}"
    value = 0
    for char in tid:
        value = value * 32 + TID_ALPHABET.index(char)
    return datetime.fromtimestamp((value >> 10) / 1e6, UTC)
