"""Problem documents: the type, the status and whether a retry can help, for every refusal."""

from __future__ import annotations

import orjson
import pytest

from idemproxy.errors import ProblemCode
from idemproxy.proxy.problems import (
    PROBLEM_CONTENT_TYPE,
    PROBLEM_TYPE_BASE,
    problem_response,
    problem_status,
)


def test_a_refusal_names_its_code_key_and_status() -> None:
    response = problem_response(ProblemCode.OUTCOME_UNKNOWN, "held", effect_key="bot/tc:1")

    assert response.status == 409
    assert response.content_type == PROBLEM_CONTENT_TYPE
    assert isinstance(response.body, bytes)
    document = orjson.loads(response.body)
    assert document["type"] == PROBLEM_TYPE_BASE + "outcome-unknown"
    assert (document["detail"], document["effect_key"]) == ("held", "bot/tc:1")
    assert response.headers["Idem-Outcome"] == "outcome-unknown"
    assert response.headers["Idem-Key"] == "bot/tc:1"


@pytest.mark.parametrize(
    ("code", "retry_after_s", "retry"),
    [
        (ProblemCode.OUTCOME_UNKNOWN, None, "false"),
        (ProblemCode.UPSTREAM_UNREACHABLE, None, "true"),
        (ProblemCode.UPSTREAM_TIMEOUT, 1, "true"),
    ],
)
def test_sdk_retry_loops_are_told_whether_a_retry_can_help(
    code: ProblemCode, retry_after_s: int | None, retry: str
) -> None:
    response = problem_response(code, "", retry_after_s=retry_after_s)

    assert response.headers["x-should-retry"] == retry
    assert response.headers["Stripe-Should-Retry"] == retry
    assert response.headers.get("Retry-After") == (None if retry_after_s is None else "1")


@pytest.mark.parametrize("code", list(ProblemCode))
def test_a_page_showing_a_refusal_answers_with_the_documents_status(code: ProblemCode) -> None:
    assert problem_status(code) == problem_response(code, "detail").status
