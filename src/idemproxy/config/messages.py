"""What is wrong with a setting, in words a user acts on: pydantic's errors as one line each,
naming the setting, where its value came from and what it must be instead; an unknown setting
with the known one it looks like. Secrets are never repeated back."""

from __future__ import annotations

import difflib
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

_SECRET_WORDS = ("token", "secret", "password")
_MAX_SHOWN_CHARS = 60
# The patterns of settings.py, said in words (pydantic would quote the regular expression).
_PATTERNS = {
    "upstreams": "an upstream's name is 1-63 of a-z, 0-9, '-' and '_', starting with a letter"
    " or digit",
    "agent_id": "must be 1-255 visible ASCII characters without spaces",
}
_BOUNDS = {
    "greater_than": ("gt", "more than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}
_KINDS = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
}
_TYPE_NAMES = {str: "a string", int: "a number", float: "a number", bool: "true or false",
               list: "a list", dict: "a mapping"}  # fmt: skip


def describe(exc: ValidationError, sources: dict[str, str], root: type[BaseModel]) -> str:
    """Every problem of ``exc``, each with its setting and the source it came from."""
    problems = []
    for error in exc.errors():
        parts = [str(part) for part in error["loc"] if part != "[key]"]
        where = ".".join(parts) or "(config)"
        source = _source(parts, sources)
        problems.append(f"{where} (from {source}): {_message(error, parts, root)}")
    return "invalid configuration: " + "; ".join(problems)


def _source(parts: list[str], sources: dict[str, str]) -> str:
    """Where the value at ``parts`` came from: the layer that set it or a key above it, else
    one that set a key below it (an unknown section given as IDEMPROXY_SECTION__KEY)."""
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in sources:
            return sources[".".join(parts[:n])]
    below = ".".join(parts) + "."
    return next((source for key, source in sources.items() if key.startswith(below)), "defaults")


def _message(error: ErrorDetails, parts: list[str], root: type[BaseModel]) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    given = _given(error["input"], parts)
    if kind == "extra_forbidden":
        return _unknown(parts, root)
    if kind == "value_error":
        return error["msg"].removeprefix("Value error, ")
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}{given}"
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        return f"must be {words} {ctx[name]:g}{given}"
    if kind == "string_pattern_mismatch":
        said = _PATTERNS.get(parts[0] if len(parts) == 2 and parts[0] == "upstreams" else parts[-1])
        return f"{said or 'does not have the form it needs'}{given}"
    if kind in ("enum", "literal_error"):
        return f"must be one of {ctx['expected']}{given}"
    if kind == "missing":
        return "is missing; set it"
    if kind == "string_type":
        return f"must be text, not {_type_name(error['input'])}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        if ctx.get("class_name") == "HostPort":
            return "must be HOST:PORT, e.g. 127.0.0.1:8080"
        return (
            "must be a mapping of settings (keys indented under it), not"
            f" {_type_name(error['input'])}"
        )
    return error["msg"].replace("Input should be", "must be")


def _given(value: Any, parts: list[str]) -> str:
    """', not VALUE' for a value safe to repeat; nothing for a secret or a long one."""
    if any(word in part.lower() for part in parts for word in _SECRET_WORDS):
        return ""
    shown = repr(value)
    return f", not {shown}" if len(shown) <= _MAX_SHOWN_CHARS else ""


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _unknown(parts: list[str], root: type[BaseModel]) -> str:
    model = _model_at(root, parts[:-1])
    known = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(parts[-1], known, n=1, cutoff=0.6)
    if close:
        return f"unknown setting; did you mean `{close[0]}`? (see docs/configuration.md)"
    return "unknown setting; remove it or fix its spelling (see docs/configuration.md)"


def _model_at(root: type[BaseModel], parts: list[str]) -> type[BaseModel] | None:
    """The settings model that holds the keys under ``parts`` (a mapping's keys skipped)."""
    model, remaining = root, list(parts)
    while remaining:
        field = model.model_fields.get(remaining.pop(0))
        if field is None:
            return None
        annotation = field.annotation
        if get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
            if not remaining:
                return None  # the mapping's own keys are names, not settings
            remaining.pop(0)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model
