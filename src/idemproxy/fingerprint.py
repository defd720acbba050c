"""Request fingerprints: what makes two requests "the same effect".

The fingerprint covers the method, upstream, path with query, and the body in canonical form
with the route's volatile fields left out. Canonical means:

- JSON re-serialized with sorted keys;
- form bodies with their fields sorted stably by name, so fields of different names may come
  in any order while the values of a repeated name (Stripe's ``items[][price]``) keep theirs;
- multipart bodies as their parts in order, each by name, file name, media type and content,
  whatever boundary the client drew; JSON parts (and parts a volatile field reaches into) are
  canonical JSON themselves;
- anything else byte for byte.

So an SDK that reorders keys, regenerates a nonce or draws a new boundary still produces the same
fingerprint, while a different message does not. The body is the decoded one: a content coding
(gzip stores a timestamp) changes nothing either.

A volatile field is a JSON pointer; ``*`` stands for every element or member. In a form body
``/metadata/nonce`` names the field ``metadata[nonce]``; in a multipart body its first token
names a part, dropped whole when the pointer ends there (``/sent_at``) and otherwise reached
into as JSON (``/payload_json/nonce``).
"""

from __future__ import annotations

import hashlib
import json
import re
from operator import itemgetter
from urllib.parse import parse_qsl, urlencode

import orjson

from idemproxy import multipart
from idemproxy.jsonpointer import WILDCARD, pointer_tokens, remove

JSON_TYPES = ("application/json", "+json")
FORM_TYPE = "application/x-www-form-urlencoded"
MULTIPART_TYPE = "multipart/form-data"
_INT64_LIMIT = 2**63
_WIDE_DIGITS = re.compile(rb"\d{19}")


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _token_pattern(token: str) -> str:
    return r"[^\[\]]*" if token == WILDCARD else re.escape(token)


def _field_pattern(tokens: list[str]) -> str:
    """``/metadata/nonce`` names the form field ``metadata[nonce]`` (Stripe's nesting)."""
    head, *rest = tokens
    return _token_pattern(head) + "".join(rf"\[{_token_pattern(token)}\]" for token in rest)


def _volatile_names(volatile_fields: tuple[str, ...]) -> re.Pattern[str] | None:
    """The form field (or part) names the volatile fields name, as one pattern."""
    if not volatile_fields:
        return None
    patterns = (_field_pattern(pointer_tokens(pointer)) for pointer in volatile_fields)
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns))


def _has_wide_number(node: object) -> bool:
    if isinstance(node, float):
        return abs(node) >= _INT64_LIMIT
    if isinstance(node, dict):
        return any(_has_wide_number(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_wide_number(value) for value in node)
    return False


def _exact_int(text: str) -> int | str:
    value = int(text)
    # A tagged string keeps integers beyond 64 bits exact and apart from any float.
    return value if abs(value) < _INT64_LIMIT else "\0int:" + text


def _canonical_json(body: bytes, volatile_fields: tuple[str, ...]) -> bytes:
    document = orjson.loads(body)
    for pointer in volatile_fields:
        remove(document, pointer)
    # orjson reads integers beyond 64 bits as floats, which would make 10**20 and 10**20 + 1
    # one effect. Such bodies are rare, so they alone take the exact (slower) parser.
    if _WIDE_DIGITS.search(body) and _has_wide_number(document):
        document = json.loads(body, parse_int=_exact_int)
        for pointer in volatile_fields:
            remove(document, pointer)
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)


def _json_or_bytes(body: bytes, volatile_fields: tuple[str, ...]) -> bytes:
    try:
        return _canonical_json(body, volatile_fields)
    except (ValueError, RecursionError):  # not JSON after all: take the bytes as they are
        return body


def _canonical_form(body: bytes, volatile_fields: tuple[str, ...]) -> bytes:
    try:
        text = body.decode("ascii")  # a form body percent-encodes everything else
    except UnicodeDecodeError:
        return body
    # Lenient parsing: a stray '&' is no reason to count the volatile fields again. Escapes
    # that are not UTF-8 stay apart (surrogateescape) instead of all turning into U+FFFD.
    pairs = parse_qsl(text, keep_blank_values=True, errors="surrogateescape")
    dropped = _volatile_names(volatile_fields)
    kept = [pair for pair in pairs if dropped is None or not dropped.fullmatch(pair[0])]
    return urlencode(sorted(kept, key=itemgetter(0)), errors="surrogateescape").encode()


def _part_pointers(volatile_fields: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The pointers into part ``name``'s JSON: ``/payload_json/nonce`` gives ``/nonce``."""
    inner = []
    for pointer in volatile_fields:
        _, head, *rest = pointer.split("/", 2)
        if rest and head in (name, WILDCARD):
            inner.append("/" + rest[0])
    return tuple(inner)


def _framed(value: bytes | str | None) -> bytes:
    if value is None:
        return b"\0"
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return b"\1" + len(data).to_bytes(8, "big") + data


def _canonical_multipart(body: bytes, content_type: str, volatile_fields: tuple[str, ...]) -> bytes:
    boundary = multipart.boundary_of(content_type)
    parts = multipart.parse(body, boundary) if boundary is not None else None
    if parts is None:
        return body
    dropped = _volatile_names(volatile_fields)
    canonical = [MULTIPART_TYPE.encode()]
    for part in parts:
        if dropped is not None and dropped.fullmatch(part.name):
            continue
        pointers = _part_pointers(volatile_fields, part.name)
        content = part.content
        if pointers or part.content_type.endswith(JSON_TYPES):
            content = _json_or_bytes(content, pointers)
        for value in (part.name, part.filename, part.content_type, content):
            canonical.append(_framed(value))
    return b"".join(canonical)


def canonical_body(body: bytes, content_type: str, volatile_fields: tuple[str, ...]) -> bytes:
    """``body`` (decoded already) in the form that decides whether two requests are one."""
    if not body:
        return body
    media_type = _media_type(content_type)
    if media_type.endswith(JSON_TYPES):
        return _json_or_bytes(body, volatile_fields)
    if media_type == FORM_TYPE:
        return _canonical_form(body, volatile_fields)
    if media_type == MULTIPART_TYPE:
        return _canonical_multipart(body, content_type, volatile_fields)
    return body


def canonical_target(path: str, query_string: str) -> str:
    if not query_string:
        return path
    pairs = parse_qsl(query_string, keep_blank_values=True)
    return f"{path}?{urlencode(sorted(pairs))}"


def fingerprint(
    method: str,
    upstream: str,
    path: str,
    query_string: str,
    body: bytes,
    content_type: str,
    volatile_fields: tuple[str, ...] = (),
) -> str:
    """Hex SHA-256 over the request's identity; equal for re-sends of the same effect."""
    digest = hashlib.sha256()
    for part in (method.upper(), upstream, canonical_target(path, query_string)):
        digest.update(part.encode("utf-8", "surrogateescape"))
        digest.update(b"\n")
    digest.update(canonical_body(body, content_type, volatile_fields))
    return digest.hexdigest()
