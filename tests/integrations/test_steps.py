"""The per-batch step counter: generations numbered in call order, tool calls by their ids."""

from __future__ import annotations

import asyncio

import pytest

from idemproxy import agent
from idemproxy.integrations import steps


def test_generations_of_a_batch_are_steps_one_two_three_of_the_llm_tool_call() -> None:
    seen = []
    with steps.batch("b-1"):
        for _ in range(3):
            with steps.generation():
                seen.append(agent.headers())
    assert seen == [
        {"Idem-Batch": "b-1", "Idem-Tool-Call": "llm", "Idem-Step": str(n)} for n in (1, 2, 3)
    ]


def test_a_new_batch_and_a_restarted_one_count_from_one_again() -> None:
    for batch in ("b-1", "b-1", "b-2"):
        with steps.batch(batch), steps.generation():
            assert agent.headers()["Idem-Step"] == "1"


def test_a_tool_call_is_keyed_by_its_id_without_the_generations_step() -> None:
    with steps.batch("b-1"):
        with steps.generation():
            pass
        with steps.tool_call("call_abc"):
            assert agent.headers() == {"Idem-Batch": "b-1", "Idem-Tool-Call": "call_abc"}
        assert agent.headers() == {"Idem-Batch": "b-1"}


def test_a_generation_outside_a_batch_is_refused_with_what_to_do() -> None:
    with pytest.raises(RuntimeError, match=r"enter steps\.batch"):
        steps.generation()


def test_an_invalid_tool_call_id_is_refused() -> None:
    with (
        steps.batch("b-1"),
        pytest.raises(ValueError, match="visible ASCII"),
        steps.tool_call("call with spaces"),
    ):
        pass


async def test_tasks_and_threads_of_a_batch_share_one_count() -> None:
    async def in_task() -> int:
        await asyncio.sleep(0)
        return steps.next_step()

    with steps.batch("b-1") as counter:
        numbers = await asyncio.gather(*(in_task() for _ in range(5)))
        numbers.append(await asyncio.to_thread(steps.next_step))
        assert counter.next() == 7
    assert sorted(numbers) == [1, 2, 3, 4, 5, 6]
