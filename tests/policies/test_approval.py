"""Approval rules: what a condition may say, and which requests it holds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from idemproxy.policies.approval import UNREADABLE, ApprovalRule, Condition, Subject, held_because


def rule(*conditions: dict[str, object]) -> ApprovalRule:
    return ApprovalRule.model_validate({"when": list(conditions)})


def subject(body: object = None, tool: str = "", **params: str) -> Subject:
    return Subject({} if body is None else body, params, tool)


def test_a_rule_without_conditions_holds_every_request() -> None:
    assert held_because(ApprovalRule(), subject()) == "every request of this route"


@pytest.mark.parametrize(
    ("body", "held"),
    [
        ({"amount": 25000}, True),
        ({"amount": "25000"}, True),  # a form's value
        ({"amount": 10000}, False),  # above, not at
        ({"amount": "lots"}, False),
        ({"amount": True}, False),
        ({}, False),  # absent: the condition does not hold
        (UNREADABLE, True),  # nobody can tell: held
    ],
)
def test_above_compares_numbers(body: object, held: bool) -> None:
    reason = held_because(rule({"field": "/amount", "above": 10000}), subject(body))
    assert (reason == "/amount above 10000") is held


def test_in_and_not_in_compare_the_value_as_text() -> None:
    listed = rule({"param": "channel_id", "in": ["1234"]})
    assert held_because(listed, subject(channel_id="1234")) == "{channel_id} in ['1234']"
    assert held_because(listed, subject(channel_id="99")) is None
    unlisted = rule({"field": "/currency", "not_in": ["usd"]})
    assert held_because(unlisted, subject({"currency": "eur"})) is not None
    assert held_because(unlisted, subject({"currency": "usd"})) is None
    assert held_because(rule({"field": "/n", "in": ["3"]}), subject({"n": 3.0})) is not None


def test_a_tool_condition_names_tools() -> None:
    tools = rule({"tool": ["delete_repo"]})
    assert held_because(tools, subject(tool="delete_repo")) == "tool in ['delete_repo']"
    assert held_because(tools, subject(tool="read_repo")) is None


def test_the_first_condition_that_holds_is_the_reason() -> None:
    either = rule({"field": "/a", "above": 1}, {"field": "/b", "above": 1})
    assert held_because(either, subject({"b": 2})) == "/b above 1"


@pytest.mark.parametrize(
    ("condition", "says"),
    [
        ({"above": 1}, "names one of field"),
        ({"field": "/a", "param": "b", "above": 1}, "not field and param"),
        ({"field": "/a"}, "needs one test"),
        ({"field": "/a", "above": 1, "in": ["x"]}, "needs one test"),
        ({"tool": ["x"], "above": 1}, "tool names and nothing else"),
        ({"field": "amount", "above": 1}, "not a JSON pointer"),
        ({"field": "/items/*/price", "above": 1}, "must name one value"),
        ({"tool": ["bad name"]}, "pattern"),
    ],
)
def test_a_condition_that_asks_no_clear_question_is_refused(
    condition: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        Condition.model_validate(condition)


def test_an_approval_lasts_the_ttl_it_is_given_within_bounds() -> None:
    assert ApprovalRule().approval_ttl_s == 900
    with pytest.raises(ValidationError):
        ApprovalRule(approval_ttl_s=0)
    assert rule({"param": "id", "in": ["1"]}).params() == frozenset({"id"})
