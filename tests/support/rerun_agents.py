"""Two agents, one per framework, that post three updates, one tool call each.

Both run the same plan against tests/support/fakes/planner.py (at ``llm_url``, its ``/v1``
API): the model asks for ``post_update`` three times, then says "done". The tool is ``update``:
``poster(proxy_url)`` posts through the proxy, and ``crash_on`` makes it raise before the effect
of the update whose text starts with it, the crash of the seed scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from idemproxy import agent

INSTRUCTIONS = "Post the three updates of the release, one at a time."
TASK = "post the updates"


class AgentCrashed(Exception):
    """The agent died between two tool calls."""


Update = Callable[[str], str]


def poster(proxy_url: str, crash_on: str | None = None) -> Update:
    def post(text: str) -> str:
        if crash_on is not None and text.startswith(crash_on):
            raise AgentCrashed(f"crashed before {text!r}")
        return post_update(proxy_url, text)

    return post


def post_update(proxy_url: str, text: str) -> str:
    with httpx.Client(event_hooks={"request": [agent.httpx_hook]}, timeout=10) as client:
        response = client.post(f"{proxy_url}/up/messages", json={"text": text})
    response.raise_for_status()
    # The tool's result goes into the next generation's request: on a re-run it is the replayed
    # answer, so that request is the recorded one again.
    return f"posted, id {response.json()['id']}"


async def run_openai_agents(
    llm_url: str, batch: str, post: Update, instructions: str = INSTRUCTIONS
) -> str:
    """The OpenAI Agents SDK agent; its final output."""
    import httpx2
    import openai
    from agents import Agent, RunConfig, Runner, UserError, function_tool, set_tracing_disabled
    from agents.models.openai_provider import OpenAIProvider

    from idemproxy.integrations import openai_agents, steps

    set_tracing_disabled(True)

    @function_tool(name_override="post_update", failure_error_function=None)
    def update(text: str) -> str:
        """Post one update."""
        return post(text)

    client = openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=f"{llm_url}/v1",
        http_client=httpx2.AsyncClient(event_hooks={"request": [agent.httpx_async_hook]}),
        max_retries=0,
    )
    provider = openai_agents.SteppedModelProvider(
        OpenAIProvider(openai_client=client, use_responses=False)
    )
    bot = Agent(
        name="releaser",
        instructions=instructions,
        model="gpt-test",
        tools=openai_agents.tagged_tools([update]),
    )
    config = RunConfig(model_provider=provider, tracing_disabled=True)
    try:
        with steps.batch(batch):
            result = await Runner.run(bot, TASK, run_config=config)
    except UserError as error:
        # The SDK wraps what a tool raised: the crash is the cause.
        if isinstance(error.__cause__, AgentCrashed):
            raise error.__cause__ from None
        raise
    finally:
        await client.close()
    return str(result.final_output)


def run_langgraph(llm_url: str, batch: str, post: Update) -> str:
    """The LangGraph agent (a model node and a ToolNode); its last message."""
    import httpx2
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from idemproxy.integrations import langchain, steps

    @tool("post_update")
    def update(text: str) -> str:
        """Post one update."""
        return post(text)

    with httpx2.Client(event_hooks={"request": [agent.httpx_hook]}) as http_client:
        chat = ChatOpenAI(
            model="gpt-test",
            api_key="sk-test",
            base_url=f"{llm_url}/v1",
            http_client=http_client,
            max_retries=0,
        )
        model = chat.bind_tools([update])

        def think(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", think)
        graph.add_node("tools", ToolNode([update], handle_tool_errors=False))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
        graph.add_edge("tools", "agent")
        messages: Any = {"messages": [("system", INSTRUCTIONS), ("user", TASK)]}
        config: RunnableConfig = {"callbacks": [langchain.IdemCallbackHandler()]}
        with steps.batch(batch):
            state = graph.compile().invoke(messages, config=config)
    return str(state["messages"][-1].content)
