"""``approval:`` of a route: effects an operator approves before they are sent.

A route's approval holds every effect it takes (``approval: {}``), or those for which one of
its conditions holds::

    approval:
      approval_ttl_s: 900            # an approval is usable this long
      when:
        - {field: /amount, above: 10000}         # a number in the body (JSON, or a form)
        - {param: channel_id, in: ["1234"]}      # a parameter of the route's path
        - {tool: [delete_repository]}            # an MCP tool by name

A field or parameter that is absent satisfies no condition; a body the proxy cannot read while
a field condition asks about it (not JSON, not a form) is held, since nobody can tell whether
the condition would hold. See docs/approvals.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from idemproxy.jsonpointer import POINTER_SYNTAX, WILDCARD, pointer_tokens, resolve
from idemproxy.policies.document import Frozen
from idemproxy.policies.kinds import TOOL_NAME

DEFAULT_APPROVAL_TTL_S = 900
MAX_APPROVAL_TTL_S = 7 * 86_400


class Condition(Frozen):
    """One thing about the request that makes it need approval."""

    field: str | None = None  # a JSON pointer into the body
    param: str | None = None  # a path template parameter
    tool: tuple[Annotated[str, Field(pattern=TOOL_NAME)], ...] | None = None
    above: float | None = None
    in_: tuple[str, ...] | None = Field(default=None, alias="in")
    not_in: tuple[str, ...] | None = None

    @field_validator("field")
    @classmethod
    def _pointer(cls, value: str | None) -> str | None:
        if value is not None:
            if not POINTER_SYNTAX.fullmatch(value):
                raise ValueError(f"field {value!r} is not a JSON pointer; write it like /amount")
            if WILDCARD in pointer_tokens(value):
                raise ValueError(f"field {value!r} must name one value: '*' is not allowed")
        return value

    @model_validator(mode="after")
    def _one_question(self) -> Condition:
        subjects = [name for name in ("field", "param", "tool") if getattr(self, name)]
        if len(subjects) != 1:
            raise ValueError(
                "a condition names one of field (a JSON pointer), param (a path parameter) or"
                f" tool (MCP tool names), not {' and '.join(subjects) or 'none'}"
            )
        tests = [name for name in ("above", "in_", "not_in") if getattr(self, name) is not None]
        if self.tool is not None:
            if tests:
                raise ValueError("a tool condition lists tool names and nothing else")
        elif len(tests) != 1:
            raise ValueError(
                f"a {subjects[0]} condition needs one test: above (a number), in or not_in"
                " (a list of values)"
            )
        return self

    def describe(self) -> str:
        """``/amount above 10000``: the condition as an operator reads it."""
        if self.tool is not None:
            return f"tool in {list(self.tool)}"
        subject = self.field or f"{{{self.param}}}"
        if self.above is not None:
            return f"{subject} above {self.above:g}"
        if self.in_ is not None:
            return f"{subject} in {list(self.in_)}"
        return f"{subject} not in {list(self.not_in or ())}"


class ApprovalRule(Frozen):
    """When a route's effects wait for an operator's approval, and how long one is usable."""

    when: tuple[Condition, ...] = ()  # any of these holds; none given: always
    approval_ttl_s: Annotated[int, Field(ge=1, le=MAX_APPROVAL_TTL_S)] = DEFAULT_APPROVAL_TTL_S
    # What the agent is told to wait before it asks again.
    retry_after_s: Annotated[int, Field(ge=1, le=3600)] = 30

    def params(self) -> frozenset[str]:
        return frozenset(c.param for c in self.when if c.param is not None)


@dataclass(frozen=True, slots=True)
class Subject:
    """What the conditions look at in one request."""

    body: object  # the body as a document (policies/subject.py); UNREADABLE when it is none
    params: Mapping[str, str]
    tool: str = ""


UNREADABLE = object()


def held_because(rule: ApprovalRule, subject: Subject) -> str | None:
    """Why the request needs approval (the condition that holds), or None when it does not."""
    if not rule.when:
        return "every request of this route"
    for condition in rule.when:
        if _holds(condition, subject):
            return condition.describe()
    return None


def _holds(condition: Condition, subject: Subject) -> bool:
    if condition.tool is not None:
        return subject.tool in condition.tool
    value: Any
    if condition.field is not None:
        if subject.body is UNREADABLE:
            return True  # nobody can tell: fail closed
        value = resolve(subject.body, condition.field)
    else:
        value = subject.params.get(condition.param or "")
    if value is None:
        return False
    if condition.above is not None:
        number = _number(value)
        return number is not None and number > condition.above
    text = _text(value)
    if condition.in_ is not None:
        return text in condition.in_
    return text not in (condition.not_in or ())


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
