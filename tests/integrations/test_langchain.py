"""LangChain and LangGraph, for real, against the fake model: what each call is keyed by."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import orjson
import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from idemproxy import agent
from idemproxy.integrations import steps
from idemproxy.integrations.langchain import IdemCallbackHandler
from tests.integrations.conftest import Model, ToolHeaders, idem_headers
from tests.support.rerun_agents import run_langgraph


def test_each_chat_model_call_is_the_next_step_and_each_tool_runs_under_its_call_id(
    model: Model,
) -> None:
    tool_headers = ToolHeaders()

    assert run_langgraph(model.url, "b-1", tool_headers) == "done"

    assert [idem_headers(g.headers) for g in model.planner.generations] == [
        {"Idem-Batch": "b-1", "Idem-Tool-Call": "llm", "Idem-Step": str(n)} for n in (1, 2, 3, 4)
    ]
    assert tool_headers.seen == [
        {"Idem-Batch": "b-1", "Idem-Tool-Call": f"call_plan{n}"} for n in (1, 2, 3)
    ]


@tool
def note(text: str) -> dict[str, str]:
    """Note the headers."""
    return agent.headers()


@tool
def fail(text: str) -> str:
    """Fail."""
    raise RuntimeError(text)


def test_a_tool_call_carries_its_id_and_a_hand_invoked_tool_the_batch_alone() -> None:
    handler = IdemCallbackHandler()
    config: RunnableConfig = {"callbacks": [handler]}
    call = {"type": "tool_call", "id": "call_x", "name": "note", "args": {"text": "a"}}
    with steps.batch("b-1"):
        message = note.invoke(call, config=config)
        by_hand = note.invoke({"text": "a"}, config=config)
        assert agent.headers() == {"Idem-Batch": "b-1"}
    assert message.tool_call_id == "call_x"
    assert orjson.loads(message.content) == {"Idem-Batch": "b-1", "Idem-Tool-Call": "call_x"}
    assert by_hand == {"Idem-Batch": "b-1"}


async def test_an_async_tool_call_carries_its_id() -> None:
    call = {"type": "tool_call", "id": "call_y", "name": "note", "args": {"text": "a"}}
    with steps.batch("b-1"):
        message = await note.ainvoke(call, config={"callbacks": [IdemCallbackHandler()]})
        assert agent.headers() == {"Idem-Batch": "b-1"}
    assert orjson.loads(message.content) == {"Idem-Batch": "b-1", "Idem-Tool-Call": "call_y"}


def test_a_failed_tool_call_ends_its_scope() -> None:
    call = {"type": "tool_call", "id": "call_z", "name": "fail", "args": {"text": "boom"}}
    with steps.batch("b-1"):
        with pytest.raises(RuntimeError, match="boom"):
            fail.invoke(call, config={"callbacks": [IdemCallbackHandler()]})
        assert agent.headers() == {"Idem-Batch": "b-1"}


def test_a_failed_model_call_ends_its_step_and_the_next_call_takes_the_next_one() -> None:
    handler = IdemCallbackHandler()
    with steps.batch("b-1"):
        first, second = uuid4(), uuid4()
        handler.on_chat_model_start({}, [[]], run_id=first)
        assert agent.headers()["Idem-Step"] == "1"
        handler.on_llm_error(RuntimeError("lost"), run_id=first)
        assert agent.headers() == {"Idem-Batch": "b-1"}
        handler.on_llm_start({}, ["prompt"], run_id=second)
        assert agent.headers()["Idem-Step"] == "2"
        handler.on_llm_end(None, run_id=second)
        assert agent.headers() == {"Idem-Batch": "b-1"}


async def test_a_scope_ended_in_another_context_is_let_go() -> None:
    handler = IdemCallbackHandler()
    run_id = uuid4()
    with steps.batch("b-1"):
        handler.on_chat_model_start({}, [[]], run_id=run_id)
        await asyncio.create_task(asyncio.to_thread(handler.on_llm_end, None, run_id=run_id))
        # Began here, ended elsewhere: the step stays on this context, until its batch ends.
        assert agent.headers()["Idem-Step"] == "1"
    assert agent.headers() == {}
