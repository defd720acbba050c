"""The repository writes an AT Protocol request makes, and whether a read-back shows them done.

``createRecord``, ``putRecord``, ``deleteRecord`` and ``applyWrites`` each name the records they
write by repository, collection and record key, so ``com.atproto.repo.getRecord`` of each key
tells whether the write happened. What the real PDS does, and what a read-back may conclude:

- a create never replaces a record: the PDS answers 500 when the key is taken. A record found at
  the key is this create's only if its value is the one sent; any other value means the create
  did not happen;
- a put writes the value whatever was there: an equal value found means done, any other value
  proves nothing (it may be the old one, or a later write);
- a delete of a missing record succeeds (200, ``{}``): a missing record means done, one still
  there means not done;
- ``applyWrites`` is one commit: every write happened or none did.

The PDS adds ``$type`` (the collection) to a value that lacks it, and a repeat of the effect
may word the route's volatile fields anew (``createdAt``): both are left out of the comparison.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from idemproxy.jsonpointer import remove
from idemproxy.policies.adapters.base import Answer, Found

APPLY_WRITES = "com.atproto.repo.applyWrites"
_WRITE_TYPE_PREFIX = APPLY_WRITES + "#"


class Kind(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Write:
    """One record a request writes; ``at`` is where its value sits in the request body."""

    kind: Kind
    repo: str
    collection: str
    rkey: str
    at: tuple[str | int, ...] = ()

    def value_in(self, document: dict[str, Any]) -> Any:
        """The value this write sends in ``document``; None where it sends none."""
        node: Any = document
        for step in self.at:
            if isinstance(step, int) and isinstance(node, list) and step < len(node):
                node = node[step]
            elif isinstance(step, str) and isinstance(node, dict):
                node = node.get(step)
            else:
                return None
        return node


@dataclass(frozen=True, slots=True)
class Judged:
    """What the read-back of one write shows; for ``PRESENT`` its part of the replayed answer."""

    found: Found
    result: dict[str, Any] | None = None
    detail: str = ""


def json_object(body: bytes) -> dict[str, Any] | None:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def writes_of(method: str, document: dict[str, Any]) -> list[Write] | None:
    """The writes a request to ``method`` makes, rkeys as the document has them ("" = none);
    None when the document is not such a request (the PDS will refuse it)."""
    repo, collection, rkey = (_text(document.get(f)) for f in ("repo", "collection", "rkey"))
    if not repo:
        return None
    if method == "com.atproto.repo.createRecord" and collection:
        return [Write(Kind.CREATE, repo, collection, rkey, ("record",))]
    if method == "com.atproto.repo.putRecord" and collection and rkey:
        return [Write(Kind.UPDATE, repo, collection, rkey, ("record",))]
    if method == "com.atproto.repo.deleteRecord" and collection and rkey:
        return [Write(Kind.DELETE, repo, collection, rkey)]
    if method == APPLY_WRITES and isinstance(document.get("writes"), list):
        return _apply_writes(repo, document["writes"])
    return None


def _apply_writes(repo: str, entries: list[Any]) -> list[Write] | None:
    writes = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            return None
        kind = _text(entry.get("$type")).removeprefix(_WRITE_TYPE_PREFIX)
        collection, rkey = _text(entry.get("collection")), _text(entry.get("rkey"))
        if kind not in tuple(Kind) or not collection or (kind != Kind.CREATE and not rkey):
            return None
        at: tuple[str | int, ...] = () if kind == Kind.DELETE else ("writes", index, "value")
        writes.append(Write(Kind(kind), repo, collection, rkey, at))
    return writes


def judge(
    write: Write, answer: Answer, sent: dict[str, Any], volatile_fields: tuple[str, ...]
) -> Judged:
    """What ``answer``, the getRecord of ``write``'s key, says about it."""
    found = json_object(answer.body) or {}
    if answer.status in (400, 404) and found.get("error") == "RecordNotFound":
        if write.kind is Kind.DELETE:
            return Judged(Found.PRESENT, {})
        return Judged(Found.ABSENT, detail=f"no record at {write.collection}/{write.rkey}")
    uri, value = found.get("uri"), found.get("value")
    if answer.status != 200 or not isinstance(uri, str) or not isinstance(value, dict):
        return Judged(Found.UNSURE, detail=f"getRecord answered {answer.status}")
    if write.kind is Kind.DELETE:
        return Judged(Found.ABSENT, detail=f"{uri} is still there")
    if _equal(write, value, sent, volatile_fields):
        return Judged(Found.PRESENT, {"uri": uri, "cid": found.get("cid")})
    if write.kind is Kind.CREATE:
        # A create never replaces a record: the one there is not this request's.
        return Judged(Found.ABSENT, detail=f"another record is at {uri}; a create never replaces")
    return Judged(Found.UNSURE, detail=f"{uri} holds another value than the one sent")


def _equal(
    write: Write, value: dict[str, Any], sent: dict[str, Any], volatile_fields: tuple[str, ...]
) -> bool:
    """True when ``value``, found at the write's key, is the value ``sent`` wrote there."""
    sent_value = write.value_in(sent)
    if not isinstance(sent_value, dict):
        return False
    expected = _with_value(sent, write.at, {"$type": write.collection, **sent_value})
    as_found = _with_value(sent, write.at, value)
    for pointer in volatile_fields:
        remove(expected, pointer)
        remove(as_found, pointer)
    return bool(expected == as_found)


def _with_value(document: dict[str, Any], at: tuple[str | int, ...], value: Any) -> Any:
    """A copy of the request ``document`` with ``value`` where ``at`` points."""
    copied = copy.deepcopy(document)
    node: Any = copied
    for step in at[:-1]:
        node = node[step]
    node[at[-1]] = value
    return copied


def combined(judged: list[Judged]) -> Found:
    """One finding for writes that are one commit: any write proven undone means none was."""
    if any(j.found is Found.ABSENT for j in judged):
        return Found.ABSENT
    if judged and all(j.found is Found.PRESENT for j in judged):
        return Found.PRESENT
    return Found.UNSURE
