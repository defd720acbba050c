"""Request fingerprints: what makes two requests "the same effect".

The fingerprint covers the method, upstream, path with query, and the body in canonical form
with the route's volatile fields left out. Canonical means: JSON re-serialized with sorted keys,
form bodies with sorted pairs, anything else byte for byte. So an SDK that reorders keys or
regenerates a nonce still produces the same fingerprint, while a different message does not.
"""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import parse_qsl, urlencode

import orjson

from idemproxy.jsonpointer import pointer_tokens, remove

JSON_TYPES = ("application/json", "+json")
FORM_TYPE = "application/x-www-form-urlencoded"
_INT64_LIMIT = 2**63
_WIDE_DIGITS = re.compile(rb"\d{19}")


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _form_field(tokens: list[str]) -> str:
    """``/metadata/nonce`` names the form field ``metadata[nonce]`` (Stripe's nesting)."""
    head, *rest = tokens
    return head + "".join(f"[{token}]" for token in rest)


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


def canonical_body(body: bytes, content_type: str, volatile_fields: tuple[str, ...]) -> bytes:
    media_type = _media_type(content_type)
    if media_type.endswith(JSON_TYPES) and body:
        try:
            return _canonical_json(body, volatile_fields)
        except (ValueError, RecursionError):  # not JSON after all: take the bytes as they are
            return body
    if media_type == FORM_TYPE and body:
        try:
            pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return body
        dropped = {_form_field(pointer_tokens(pointer)) for pointer in volatile_fields}
        return urlencode(sorted(pair for pair in pairs if pair[0] not in dropped)).encode()
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
