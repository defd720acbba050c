"""A request's body as a document an approval's conditions can point into.

JSON is itself. A form (``application/x-www-form-urlencoded``, as Stripe's SDKs send) becomes
the document its brackets describe, so ``metadata[order]=7`` is ``/metadata/order`` and
``amount=5000`` is ``/amount`` (a string, which ``above`` reads as a number).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import orjson

from idemproxy.policies.approval import UNREADABLE

FORM_TYPE = "application/x-www-form-urlencoded"
_BRACKETS = re.compile(r"\[([^\[\]]*)\]")


def body_document(body: bytes, content_type: str) -> object:
    """The body as JSON values, or UNREADABLE when it is neither JSON nor a form."""
    media_type = content_type.partition(";")[0].strip().lower()
    if not body:
        return {}
    if media_type == FORM_TYPE:
        return _form(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return UNREADABLE


def _form(body: bytes) -> object:
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        return UNREADABLE
    document: dict[str, object] = {}
    for name, value in pairs:
        head, _, rest = name.partition("[")
        path = [head, *_BRACKETS.findall("[" + rest)] if rest else [head]
        _put(document, path, value)
    return document


def _put(document: dict[str, object], path: list[str], value: str) -> None:
    """Set ``value`` at ``path``; ``a[]`` appends (a list is kept as an object of positions,
    which a pointer's ``/a/0`` reads the same)."""
    node = document
    for name in path[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            child = node[name] = {}
        node = child
    last = path[-1] or str(sum(1 for key in node if key.isdigit()))
    node[last] = value
