"""An upstream that did not answer is refused alike on every path; what was sent sets the code."""

from __future__ import annotations

from idemproxy.effects.refusals import upstream_failed
from idemproxy.errors import ProblemCode
from idemproxy.proxy.forward import UpstreamFailure


def test_nothing_sent_is_unreachable_and_safe_to_retry_whatever_the_caller_says() -> None:
    failure = UpstreamFailure(sent=False, timed_out=True, reason="connect timeout")

    refusal = upstream_failed(failure, "held for review", retry_after_s=1)

    assert refusal.code is ProblemCode.UPSTREAM_UNREACHABLE
    assert refusal.detail == "nothing was sent (connect timeout); retrying is safe"
    assert refusal.retry_after_s is None


def test_a_sent_request_is_a_timeout_or_a_lost_connection() -> None:
    timed_out = UpstreamFailure(sent=True, timed_out=True, reason="read timeout")
    lost = UpstreamFailure(sent=True, timed_out=False, reason="connection reset")

    assert upstream_failed(timed_out).code is ProblemCode.UPSTREAM_TIMEOUT
    assert upstream_failed(lost).code is ProblemCode.UPSTREAM_DISCONNECTED
    assert upstream_failed(lost).detail == "the upstream did not answer: connection reset"
    held = upstream_failed(lost, "held for review", retry_after_s=1)
    assert (held.detail, held.retry_after_s) == ("held for review", 1)
