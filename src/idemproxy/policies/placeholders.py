"""Placeholders in the request templates a policy declares (append read-backs, compensations).

A placeholder is ``{SOURCE}`` or ``{SOURCE|segment:N}``:

- ``{path.NAME}``: a parameter of the route's path template, as the original request had it
- ``{request./POINTER}``: a value in the original request's JSON body (append read-backs only:
  a record keeps no request body, so a compensation cannot use it)
- ``{response./POINTER}``: a value in the recorded JSON response (compensations only)

``segment:N`` splits the value on ``/`` and keeps part ``N`` (negative: from the end), so the
record key of a Bluesky ``at://did/collection/rkey`` URI is ``{response./uri|segment:-1}``.
Filled into a path, a value is percent-encoded; in a body it is kept as it is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote

import orjson

from idemproxy.jsonpointer import POINTER_SYNTAX, resolve
from idemproxy.policies.templates import compile_template

PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SPEC = re.compile(
    r"(?P<source>path|request|response)\.(?P<name>[^|]+)(?:\|segment:(?P<segment>-?\d+))?"
)


class Source(StrEnum):
    PATH = "path"
    REQUEST = "request"
    RESPONSE = "response"


@dataclass(frozen=True, slots=True)
class Placeholder:
    text: str  # as written, braces included
    source: Source
    name: str  # a path parameter, or a JSON pointer
    segment: int | None = None


class MissingValue(LookupError):
    """A placeholder names a value the request or response at hand does not have."""

    def __init__(self, placeholder: Placeholder, why: str) -> None:
        super().__init__(f"{placeholder.text}: {why}")
        self.placeholder = placeholder
        self.why = why


def parse(template: str) -> list[Placeholder]:
    """Every placeholder in ``template``; ``ValueError`` with the fix for a malformed one."""
    found = []
    for match in PLACEHOLDER.finditer(template):
        spec = _SPEC.fullmatch(match.group(1))
        if spec is None:
            raise ValueError(
                f"{match.group()} is not a placeholder; write {{path.NAME}}, {{request./pointer}}"
                " or {response./pointer}, optionally followed by |segment:N"
            )
        source, name = Source(spec["source"]), spec["name"]
        if source is not Source.PATH and not POINTER_SYNTAX.match(name):
            raise ValueError(f"{match.group()}: {name!r} is not a JSON pointer such as '/id'")
        segment = int(spec["segment"]) if spec["segment"] is not None else None
        found.append(Placeholder(match.group(), source, name, segment))
    stray = PLACEHOLDER.sub("", template)
    if "{" in stray or "}" in stray:
        raise ValueError(f"{template!r} has an unmatched brace")
    return found


def check(
    template: str, path_params: frozenset[str], allowed: frozenset[Source], where: str
) -> None:
    """Refuse placeholders that could never be filled in ``where`` (a policy field)."""
    for placeholder in parse(template):
        if placeholder.source not in allowed:
            names = " or ".join(sorted(f"{{{s}.…}}" for s in allowed))
            raise ValueError(f"{where}: {placeholder.text} cannot be used here; use {names}")
        if placeholder.source is Source.PATH and placeholder.name not in path_params:
            known = ", ".join(sorted(path_params)) or "none"
            raise ValueError(
                f"{where}: {placeholder.text} names no parameter of the route's path template"
                f" (it has: {known})"
            )


def path_params(template: str, path: str) -> dict[str, str]:
    """The parameters of ``path`` under a route's path template (what ``{path.NAME}`` reads)."""
    match = _pattern(template).fullmatch(path)
    if match is None:
        return {}
    return {name: value for name, value in match.groupdict().items() if value is not None}


@functools.lru_cache(maxsize=256)
def _pattern(template: str) -> re.Pattern[str]:
    return compile_template(template)


def templates_in(value: object) -> list[str]:
    """Every string inside a body template (a JSON value), keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in (key, *templates_in(item))]
    if isinstance(value, list | tuple):
        return [text for item in value for text in templates_in(item)]
    return []


@dataclass
class Values:
    """What placeholders are filled from: path parameters and the two JSON bodies."""

    path: Mapping[str, str]
    request: bytes | None = None
    response: bytes | None = None
    # Why the recorded response cannot be read, when it cannot (a compressed body cut short).
    response_unreadable: str = ""
    _parsed: dict[Source, Any] = field(default_factory=dict)

    def lookup(self, placeholder: Placeholder) -> Any:
        if placeholder.source is Source.PATH:
            value: Any = self.path.get(placeholder.name)
            if value is None:
                raise MissingValue(placeholder, "the request path has no such parameter")
        else:
            value = resolve(self._document(placeholder), placeholder.name)
            if value is None or isinstance(value, dict | list):
                raise MissingValue(
                    placeholder, f"the {placeholder.source} has no value at {placeholder.name}"
                )
        if placeholder.segment is None:
            return value
        parts = str(value).split("/")
        if not -len(parts) <= placeholder.segment < len(parts):
            raise MissingValue(placeholder, f"{value!r} has no segment {placeholder.segment}")
        return parts[placeholder.segment]

    def _document(self, placeholder: Placeholder) -> Any:
        source = placeholder.source
        if source is Source.RESPONSE and self.response_unreadable:
            raise MissingValue(
                placeholder, f"the response cannot be read: {self.response_unreadable}"
            )
        if source not in self._parsed:
            body = self.request if source is Source.REQUEST else self.response
            try:
                self._parsed[source] = orjson.loads(body) if body else None
            except orjson.JSONDecodeError:
                raise MissingValue(placeholder, f"the {source} body is not JSON") from None
        return self._parsed[source]


def fill_text(template: str, values: Values, *, in_path: bool) -> str:
    """``template`` with each placeholder replaced; ``MissingValue`` names the first that fails."""

    def replace(match: re.Match[str]) -> str:
        (placeholder,) = parse(match.group())
        text = _text(values.lookup(placeholder))
        return quote(text, safe="") if in_path else text

    return PLACEHOLDER.sub(replace, template)


def fill_value(template: object, values: Values) -> object:
    """A body template filled in; a string that is one placeholder keeps the value's type."""
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole is not None:
            return values.lookup(parse(template)[0])
        return fill_text(template, values, in_path=False)
    if isinstance(template, dict):
        return {
            fill_text(key, values, in_path=False): fill_value(item, values)
            for key, item in template.items()
        }
    if isinstance(template, list | tuple):
        return [fill_value(item, values) for item in template]
    return template


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
