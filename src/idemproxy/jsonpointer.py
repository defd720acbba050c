"""The small part of RFC 6901 (JSON pointers) that policies use."""

from __future__ import annotations

import re

import orjson

_MISSING = object()
# What a pointer a policy may name looks like: '/id', '/record/createdAt', '/a~1b'.
POINTER_SYNTAX = re.compile(r"^(/([^~/]|~[01])*)+$")


def pointer_tokens(pointer: str) -> list[str]:
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]]


def _step(node: object, token: str) -> object:
    if isinstance(node, dict):
        return node.get(token, _MISSING)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return _MISSING


def resolve(document: object, pointer: str) -> object | None:
    """The value at ``pointer``, or None where the pointer does not resolve."""
    node = document
    for token in pointer_tokens(pointer):
        node = _step(node, token)
        if node is _MISSING:
            return None
    return node


def remove(document: object, pointer: str) -> None:
    """Remove the value at ``pointer`` in place; a pointer that does not resolve is a no-op."""
    *parents, last = pointer_tokens(pointer)
    node = document
    for token in parents:
        node = _step(node, token)
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        # Replace rather than delete so the positions of later elements keep their meaning.
        node[int(last)] = None


def replace_at(document: object, pointer: str, value: object) -> bool:
    """Set the existing value at ``pointer`` in place; False when the pointer does not resolve."""
    *parents, last = pointer_tokens(pointer)
    node = document
    for token in parents:
        node = _step(node, token)
    if isinstance(node, dict) and last in node:
        node[last] = value
        return True
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = value
        return True
    return False


def string_at(body: bytes, pointer: str) -> str:
    """The scalar at ``pointer`` in a JSON body as text, or "" (a response need not be JSON)."""
    try:
        value = resolve(orjson.loads(body), pointer)
    except orjson.JSONDecodeError:
        return ""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    return ""
