"""slack_sdk through the proxy: one message per tool call; an unknown outcome waits for review.

Slack has no idempotency key of its own (the ``none`` adapter), so a post whose outcome is
unknown is never sent again by the proxy: it waits for an operator.
"""

from __future__ import annotations

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from tests.sdk.conftest import Fakes, tool_call
from tests.support.fakes.service import Fault, Planned
from tests.support.processes import ServedProxy


def new_client(proxy: ServedProxy, headers: dict[str, str]) -> WebClient:
    """A fresh SDK client with the tool call in its default headers."""
    client = WebClient(token="xoxb-test", base_url=f"{proxy.url}/slack/api/", headers=headers)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    return client


def post(proxy: ServedProxy, run_id: str, text: str) -> dict[str, object]:
    response = new_client(proxy, tool_call(run_id)).chat_postMessage(channel="C1", text=text)
    assert isinstance(response.data, dict)
    return response.data


def test_a_rerun_after_a_crash_replays_the_same_message(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    first = post(proxy, run_id, f"deployed {run_id}")
    again = post(proxy, run_id, f"deployed {run_id}")

    assert again == first
    assert len(fakes.slack.made_for(run_id)) == 1


def test_an_sdk_retry_after_a_rate_limit_makes_one_message(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    limited = Planned(Fault.FAIL_BEFORE, 429, {"ok": False, "error": "ratelimited"})
    fakes.slack.plan("message", Planned(limited.fault, 429, limited.body, {"Retry-After": "0"}))

    answer = post(proxy, run_id, f"hello {run_id}")

    assert answer["ok"] is True
    assert len(fakes.slack.made_for(run_id)) == 1
    assert len(fakes.slack.sent_with(run_id)) == 2


def test_an_unknown_outcome_waits_for_review_and_is_never_resent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.slack.plan("message", Planned(Fault.DROP_AFTER))
    with pytest.raises(SlackApiError) as lost:
        post(proxy, run_id, f"maybe {run_id}")
    assert lost.value.response.status_code == 502

    with pytest.raises(SlackApiError) as held:
        post(proxy, run_id, f"maybe {run_id}")

    assert held.value.response.status_code == 409
    problem = held.value.response.data
    assert isinstance(problem, dict)
    assert problem["type"].endswith("/outcome-unknown")
    assert len(fakes.slack.made_for(run_id)) == 1
    assert len(fakes.slack.sent_with(run_id)) == 1


def refusal(proxy: ServedProxy, headers: dict[str, str], text: str) -> SlackApiError:
    with pytest.raises(SlackApiError) as refused:
        new_client(proxy, headers).chat_postMessage(channel="C1", text=text)
    return refused.value


def test_a_rerun_worded_anew_posts_nothing_and_says_what_was_posted(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    first = post(proxy, run_id, f"Deployed {run_id} to production.")
    rerun = refusal(proxy, tool_call(run_id), f"{run_id} is now live in production.")

    assert rerun.response.status_code == 409
    problem = rerun.response.data
    assert isinstance(problem, dict)
    assert problem["type"].endswith("/tool-call-already-acted")
    assert problem["external_id"] == first["ts"]
    assert problem["recorded_answer"] == first
    assert "Idem-Step" in problem["detail"]
    assert len(fakes.slack.made_for(run_id)) == 1
    assert len(fakes.slack.sent_with(run_id)) == 1


def test_a_thread_of_posts_with_steps_posts_each_once(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    def thread(wording: str) -> list[str]:
        stamps: list[str] = []
        for step in ("1", "2", "3"):
            client = new_client(proxy, {**tool_call(run_id), "Idem-Step": step})
            parent = stamps[0] if stamps else None
            answer = client.chat_postMessage(
                channel="C1", text=f"{wording} {step}", thread_ts=parent
            )
            stamps.append(str(answer["ts"]))
        return stamps

    posted = thread(f"{run_id} part")
    assert thread(f"{run_id} part") == posted
    assert len(fakes.slack.made_for(run_id)) == 3


def test_a_second_post_without_a_step_is_refused_and_not_sent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    post(proxy, run_id, f"{run_id} 1/2")
    second = refusal(proxy, tool_call(run_id), f"{run_id} 2/2")

    assert second.response.status_code == 409
    assert second.response.headers["x-should-retry"] == "false"
    assert "Idem-Step" in second.response.data["another_effect"]
    assert len(fakes.slack.made_for(run_id)) == 1
    assert not fakes.slack.sent_with(f"{run_id} 2/2")


def test_a_rerun_worded_anew_after_a_rate_limit_is_sent_once(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.slack.plan("message", Planned(Fault.FAIL_BEFORE, 429, {"ok": False}))
    client = WebClient(token="xoxb-test", base_url=f"{proxy.url}/slack/api/")
    client.headers.update(tool_call(run_id))
    with pytest.raises(SlackApiError) as limited:
        client.chat_postMessage(channel="C1", text=f"hello {run_id}")
    assert limited.value.response.status_code == 429

    answer = post(proxy, run_id, f"hi there {run_id}")

    assert answer["ok"] is True
    assert [made["ts"] for made in fakes.slack.made_for(run_id)] == [answer["ts"]]
