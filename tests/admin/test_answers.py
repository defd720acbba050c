"""Reading the admin API's answers: documents, refusals, and why there was no answer."""

from __future__ import annotations

import orjson

from idemproxy.admin.answers import TIMEOUT_S, answer_document, reason, refusal
from idemproxy.errors import ProblemCode


def test_only_a_json_object_is_a_document() -> None:
    assert answer_document(b'{"a": 1}', "application/json") == {"a": 1}
    assert answer_document(b'{"a": 1}', "application/problem+json") == {"a": 1}
    assert answer_document(b"[1]", "application/json") is None
    assert answer_document(b"{", "application/json") is None
    assert answer_document(b'{"a": 1}', "text/html") is None


def test_a_problem_is_the_refusal_it_stands_for() -> None:
    problem = {
        "type": "https://idemproxy.dev/problems/state-conflict",
        "title": "Conflicts with the current state",
        "status": 409,
        "detail": "decided already",
        "state": "approved",
    }
    refused = refusal(409, orjson.loads(orjson.dumps(problem)), "7")
    assert (refused.code, refused.detail, refused.retry_after_s) == (
        ProblemCode.STATE_CONFLICT,
        "decided already",
        7,
    )
    assert refused.extra == {"state": "approved"}
    unknown = refusal(400, {"type": "https://idemproxy.dev/problems/new-thing"}, "")
    assert unknown.code is ProblemCode.INVALID_REQUEST
    assert unknown.detail == "the admin API answered 400"


def test_no_answer_is_said_in_a_few_words() -> None:
    assert reason(TimeoutError()) == f"no answer within {TIMEOUT_S:g} s"
    assert reason(ValueError("odd")) == "odd"
    assert reason(ValueError()) == "ValueError"
