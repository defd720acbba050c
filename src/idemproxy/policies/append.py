"""Append routes: effects that add text to the end of a value the upstream keeps (a memory
block, a document, a log), and how the proxy reads that value back before sending.

An interrupted or repeated append doubles text, and no key helps when the agent re-runs with a
new one. So before forwarding, the proxy reads the value and compares its tail with the text
the request would add: all of it already there, part of it (an append cut off), or none.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from idemproxy.jsonpointer import POINTER_SYNTAX
from idemproxy.policies import placeholders
from idemproxy.policies.placeholders import Source


class AppendRule(BaseModel):
    """``append:`` of a route: where the current value is read, and where the text is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # GET this path below the upstream for the current value; {path.NAME} and
    # {request./pointer} are filled from the append request.
    read: str
    # Where the current text is in the read answer (a JSON pointer); unset: the whole body.
    value: str | None = None
    # Where the appended text is in the request body (a JSON pointer); unset: the whole body.
    content: str | None = None
    # A shorter match between the value's end and the text's start counts as chance, not as
    # the first part of an interrupted append: "\n" after "\n" is no half-done append.
    min_overlap_chars: Annotated[int, Field(ge=1, le=1_000_000)] = 8
    # The text counts as already appended when the value's end holds it but for whitespace
    # around it: for an upstream that trims what it stores, whose re-sent append would
    # otherwise be sent again. Off by default: there, whitespace is text like any other.
    ignore_surrounding_whitespace: bool = False

    @field_validator("read")
    @classmethod
    def _read_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"append.read {value!r} must be a path starting with '/'")
        placeholders.parse(value)
        return value

    @field_validator("value", "content")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        if value is not None and not POINTER_SYNTAX.match(value):
            raise ValueError(f"{value!r} is not a JSON pointer (RFC 6901) such as '/text'")
        return value

    def check_fits(self, path_params: frozenset[str]) -> None:
        """Refuse placeholders the append request cannot fill."""
        allowed = frozenset({Source.PATH, Source.REQUEST})
        placeholders.check(self.read, path_params, allowed, "append.read")
