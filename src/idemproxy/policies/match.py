"""Which requests a route takes: its methods and path template, checked as they load."""

from __future__ import annotations

import re

from pydantic import field_validator

from idemproxy.policies.document import Frozen
from idemproxy.policies.templates import is_param, is_rest, param_name

HTTP_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
_PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A literal, "{name}" after an optional literal prefix ("bot{token}"), or "{name*}".
_TEMPLATE_SEGMENT = re.compile(rf"^([^{{}}]*\{{{_PARAM_NAME}\}}|\{{{_PARAM_NAME}\*\}}|[^{{}}]*)$")


class Match(Frozen):
    """Which requests a route takes: HTTP methods and a path template.

    Templates are ``/``-separated; ``{name}`` matches one segment, ``prefix{name}`` one that
    starts with ``prefix``, ``{name*}`` (last segment only) matches the rest of the path, and
    ``*`` for methods matches any method.
    """

    methods: tuple[str, ...] = ("*",)
    path: str = "/{rest*}"

    @field_validator("methods", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        upper = tuple(method.upper() for method in value)
        unknown = [m for m in upper if m != "*" and m not in HTTP_METHODS]
        if unknown:
            raise ValueError(
                f"unknown HTTP method {unknown[0]!r}; use one of {sorted(HTTP_METHODS)} or '*'"
            )
        return upper

    @field_validator("path")
    @classmethod
    def _valid_template(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path template {value!r} must start with '/'")
        segments = value.split("/")[1:]
        names: set[str] = set()
        for index, segment in enumerate(segments):
            if not _TEMPLATE_SEGMENT.match(segment):
                raise ValueError(
                    f"path template segment {segment!r} is not a literal, '{{name}}',"
                    " 'prefix{name}' or '{name*}'"
                )
            if is_rest(segment) and index != len(segments) - 1:
                raise ValueError(f"'{segment}' may only stand as the last segment of {value!r}")
            if is_param(segment) or is_rest(segment):
                name = param_name(segment)
                if name in names:
                    raise ValueError(f"'{{{name}}}' appears twice in {value!r}; name each apart")
                names.add(name)
        return value
