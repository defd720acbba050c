"""The OpenAI Agents SDK, for real, against the fake model: what each call is keyed by."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any, cast

from agents import Model, ModelProvider, RunContextWrapper, WebSearchTool, function_tool
from agents.mcp import MCPToolMetaContext
from agents.tool_context import ToolContext

from idemproxy import agent
from idemproxy.integrations import openai_agents, steps
from tests.integrations.conftest import Model as FakeModel
from tests.integrations.conftest import ToolHeaders, idem_headers
from tests.support.rerun_agents import run_openai_agents


async def test_each_model_call_is_the_next_step_and_each_tool_runs_under_its_call_id(
    model: FakeModel,
) -> None:
    tool = ToolHeaders()

    assert await run_openai_agents(model.url, "b-1", tool) == "done"

    assert [idem_headers(g.headers) for g in model.planner.generations] == [
        {"Idem-Batch": "b-1", "Idem-Tool-Call": "llm", "Idem-Step": str(n)} for n in (1, 2, 3, 4)
    ]
    assert tool.seen == [
        {"Idem-Batch": "b-1", "Idem-Tool-Call": f"call_plan{n}"} for n in (1, 2, 3)
    ]


def test_a_tagged_tool_stays_tagged_when_copied_and_is_tagged_once() -> None:
    @function_tool
    def note(text: str) -> str:
        """Note it."""
        return text

    tagged = openai_agents.tagged(note)
    assert isinstance(tagged.on_invoke_tool, openai_agents.TaggedInvoker)
    assert not isinstance(note.on_invoke_tool, openai_agents.TaggedInvoker)
    assert openai_agents.tagged(tagged) is tagged
    assert isinstance(copy.copy(tagged).on_invoke_tool, openai_agents.TaggedInvoker)


def test_tools_that_are_not_function_tools_are_left_as_they_are() -> None:
    search = WebSearchTool()
    tools = openai_agents.tagged_tools([search])
    assert tools == [search]


class Streaming(Model):
    """A model that streams two events, noting the headers its HTTP calls would carry."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.closed = False

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for event in ("one", "two"):
            self.seen.append(agent.headers())
            yield event

    async def close(self) -> None:
        self.closed = True


async def test_a_streamed_response_is_one_step_from_its_first_event_to_its_last() -> None:
    inner = Streaming()
    stepped = openai_agents.SteppedModel(inner)
    with steps.batch("b-1"):
        events = [event async for event in stepped.stream_response()]
        assert agent.headers() == {"Idem-Batch": "b-1"}
    assert events == ["one", "two"]
    assert inner.seen == [{"Idem-Batch": "b-1", "Idem-Tool-Call": "llm", "Idem-Step": "1"}] * 2
    await stepped.close()
    assert inner.closed


class Provider(ModelProvider):
    def __init__(self) -> None:
        self.model = Streaming()
        self.closed = False

    def get_model(self, model_name: str | None) -> Model:
        return self.model

    async def aclose(self) -> None:
        self.closed = True


async def test_the_provider_steps_the_models_it_hands_out_and_passes_the_rest_through() -> None:
    inner = Provider()
    provider = openai_agents.SteppedModelProvider(inner)
    stepped = provider.get_model("gpt-test")
    assert isinstance(stepped, openai_agents.SteppedModel)
    assert stepped.inner is inner.model
    assert stepped.get_retry_advice(cast(Any, None)) is None
    await provider.aclose()
    assert inner.closed


def test_an_mcp_tool_call_names_the_batch_and_the_model_s_call_id_in_its_meta() -> None:
    call = ToolContext(None, tool_name="send_message", tool_call_id="call_9Ab", tool_arguments="{}")
    context = MCPToolMetaContext(call, "tools", "send_message", {})
    with steps.batch("release-11"):
        assert openai_agents.mcp_meta(context) == {
            "dev.idemproxy/batch": "release-11",
            "dev.idemproxy/toolCall": "call_9Ab",
        }
    # Outside a tool call (a resolver asked with a plain run context): the batch alone.
    outside = MCPToolMetaContext(RunContextWrapper(None), "tools", "send_message", {})
    with steps.batch("release-11"):
        assert openai_agents.mcp_meta(outside) == {"dev.idemproxy/batch": "release-11"}
