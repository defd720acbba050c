"""The small part of RFC 6901 (JSON pointers) that policies use."""

from __future__ import annotations

import re

import orjson

_MISSING = object()
# In a volatile field's pointer, a token that stands for every member (no literal "*" key then).
WILDCARD = "*"
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
    """Remove the value at ``pointer`` in place; a pointer that does not resolve is a no-op.

    A ``*`` token stands for every element of an array and every member of an object, so
    ``/writes/*/value/createdAt`` reaches the ``createdAt`` of each write.
    """
    _remove(document, pointer_tokens(pointer))


def _remove(node: object, tokens: list[str]) -> None:
    token, *rest = tokens
    if rest:
        for child in _children(node, token):
            _remove(child, rest)
    elif isinstance(node, dict):
        if token == WILDCARD:
            node.clear()
        else:
            node.pop(token, None)
    elif isinstance(node, list):
        # Replace rather than delete so the positions of later elements keep their meaning.
        if token == WILDCARD:
            node[:] = [None] * len(node)
        elif token.isdigit() and int(token) < len(node):
            node[int(token)] = None


def _children(node: object, token: str) -> list[object]:
    if token != WILDCARD:
        child = _step(node, token)
        return [] if child is _MISSING else [child]
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list):
        return list(node)
    return []


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
