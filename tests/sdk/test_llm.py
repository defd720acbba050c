"""The openai and anthropic SDKs through the proxy: a resumed batch sees the same generation.

Generations are recorded and replayed; one that failed may be generated again (SPEC 1), which
is what the SDKs' own retries do.
"""

from __future__ import annotations

import contextlib
import time

import anthropic
import openai
import pytest

from tests.sdk.conftest import Fakes, tool_call
from tests.support.fakes.service import Fault, Planned
from tests.support.processes import ServedProxy

# Both SDKs take the wait before a retry from this header: keeps the tests fast.
QUICK_RETRY = {"retry-after-ms": "10"}


def ask_openai(proxy: ServedProxy, run_id: str) -> openai.types.chat.ChatCompletion:
    client = openai.OpenAI(
        api_key="sk-test", base_url=f"{proxy.url}/openai/v1", default_headers=tool_call(run_id)
    )
    with client:
        return client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": f"summarise {run_id}"}]
        )


def ask_anthropic(proxy: ServedProxy, run_id: str) -> anthropic.types.Message:
    client = anthropic.Anthropic(
        api_key="sk-ant-test", base_url=f"{proxy.url}/anthropic", default_headers=tool_call(run_id)
    )
    with client:
        return client.messages.create(
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": f"summarise {run_id}"}],
        )


def test_openai_rerun_after_a_crash_sees_the_same_completion(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    first = ask_openai(proxy, run_id)
    again = ask_openai(proxy, run_id)

    assert again.model_dump() == first.model_dump()
    assert len(fakes.openai.made_for(run_id)) == 1


def test_openai_sdk_retry_after_a_500_makes_one_generation(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.openai.plan(
        "generate", Planned(Fault.FAIL_BEFORE, 500, {"error": {"message": "boom"}}, QUICK_RETRY)
    )

    completion = ask_openai(proxy, run_id)

    made = fakes.openai.made_for(run_id)
    assert len(made) == 1
    assert completion.id == made[0]["id"]
    assert len(fakes.openai.sent_with(run_id)) == 2


def test_openai_model_list_is_a_safe_read(proxy: ServedProxy) -> None:
    with openai.OpenAI(api_key="sk-test", base_url=f"{proxy.url}/openai/v1") as client:
        assert [model.id for model in client.models.list()] == ["model-1"]


def test_anthropic_rerun_after_a_crash_sees_the_same_message(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    first = ask_anthropic(proxy, run_id)
    again = ask_anthropic(proxy, run_id)

    assert again.model_dump() == first.model_dump()
    assert len(fakes.anthropic.made_for(run_id)) == 1


def test_anthropic_sdk_retry_after_overload_makes_one_generation(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    fakes.anthropic.plan("generate", Planned(Fault.FAIL_BEFORE, 529, overloaded, QUICK_RETRY))

    message = ask_anthropic(proxy, run_id)

    made = fakes.anthropic.made_for(run_id)
    assert len(made) == 1
    assert message.id == made[0]["id"]
    assert len(fakes.anthropic.sent_with(run_id)) == 2


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_generation_cut_off_is_generated_again_by_the_sdk_retry(
    proxy: ServedProxy, fakes: Fakes, run_id: str, sdk: str
) -> None:
    service = fakes.openai if sdk == "openai" else fakes.anthropic
    ask = ask_openai if sdk == "openai" else ask_anthropic
    service.plan("generate", Planned(Fault.DROP_AFTER))

    # The proxy answers the lost generation 502 with x-should-retry: true, so the SDK's own
    # retry loop asks again. Unlike an external effect, a lost generation is not held for
    # review: it runs again.
    answer = ask(proxy, run_id)

    made = service.made_for(run_id)
    assert len(made) == 2
    assert answer.id == made[1]["id"]


def upload(proxy: ServedProxy, run_id: str, timeout_s: float) -> openai.types.FileObject:
    client = openai.OpenAI(
        api_key="sk-test",
        base_url=f"{proxy.url}/openai/v1",
        default_headers=tool_call(run_id),
        max_retries=2,
        timeout=timeout_s,
    )
    with client:
        notes = (f"notes-{run_id}.txt", f"notes of {run_id}".encode(), "text/plain")
        return client.files.create(file=notes, purpose="assistants")


def test_openai_sdk_retries_of_a_slow_file_upload_make_one_file(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    # The first upload takes longer than the SDK waits: it times out and retries, each retry a
    # multipart body with a new random boundary.
    fakes.openai.plan("upload", Planned(Fault.SLOW, delay_s=1.5))
    # If every retry times out too, the agent restarts and runs the tool call again.
    with contextlib.suppress(openai.APITimeoutError):
        upload(proxy, run_id, timeout_s=0.5)
    deadline = time.monotonic() + 5
    while not fakes.openai.made_for(run_id) and time.monotonic() < deadline:
        time.sleep(0.05)

    rerun = upload(proxy, run_id, timeout_s=10)

    made = fakes.openai.made_for(run_id)
    assert len(made) == 1
    assert rerun.id == made[0]["id"]
