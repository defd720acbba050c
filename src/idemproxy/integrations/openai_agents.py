"""The OpenAI Agents SDK (``openai-agents``) with stable ids for its model and tool calls.

Every model call of a run is the batch's next step (``steps.generation``) and every function
tool runs under the model's own tool call id, so a re-run of a crashed batch is replayed::

    import httpx2, openai
    from agents import Agent, RunConfig, Runner, set_tracing_disabled
    from agents.models.openai_provider import OpenAIProvider
    from idemproxy import agent
    from idemproxy.integrations import openai_agents, steps

    client = openai.AsyncOpenAI(
        base_url="http://127.0.0.1:8080/openai/v1",
        http_client=httpx2.AsyncClient(event_hooks={"request": [agent.httpx_async_hook]}),
    )
    provider = openai_agents.SteppedModelProvider(OpenAIProvider(openai_client=client))
    bot = Agent(name="bot", tools=openai_agents.tagged_tools([post_update]))
    with steps.batch("batch-7"):
        await Runner.run(bot, task, run_config=RunConfig(model_provider=provider))

The tools' own HTTP clients carry the headers through the hooks of ``idemproxy.agent``. An
MCP server's tools carry them in each call's ``_meta`` (docs/mcp.md)::

    server = MCPServerStreamableHttp(
        params={"url": "http://127.0.0.1:8080/tools/mcp"}, tool_meta_resolver=openai_agents.mcp_meta
    )
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from idemproxy import agent
from idemproxy.integrations import steps

try:
    from agents import FunctionTool, Model, ModelProvider
    from agents.mcp import MCPToolMetaContext
    from agents.tool_context import ToolContext
except ImportError as missing:  # pragma: no cover - only without the SDK installed
    raise ImportError(
        "idemproxy.integrations.openai_agents needs the OpenAI Agents SDK:"
        " pip install openai-agents"
    ) from missing

ToolInvoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


class SteppedModel(Model):
    """A model whose every response (and its SDK retries) is the batch's next generation."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        with steps.generation():
            return await self.inner.get_response(*args, **kwargs)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        with steps.generation():
            async for event in self.inner.stream_response(*args, **kwargs):
                yield event

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)


class SteppedModelProvider(ModelProvider):
    """Hands out the models of ``inner``, each a ``SteppedModel``."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return SteppedModel(self.inner.get_model(model_name))

    async def aclose(self) -> None:
        await self.inner.aclose()


class TaggedInvoker:
    """A function tool's invoker run under ``Idem-Tool-Call`` = the model's tool call id.

    Everything else (argument preparation for approvals, the sync-tool marker) is the invoker
    it wraps: the SDK reads those as attributes of ``on_invoke_tool``.
    """

    def __init__(self, inner: ToolInvoker) -> None:
        self.inner = inner

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> Any:
        with steps.tool_call(ctx.tool_call_id):
            return await self.inner(ctx, arguments)

    def __agents_bind_function_tool__(self, function_tool: FunctionTool) -> TaggedInvoker:
        # A copied tool rebinds its invoker to itself: keep the tag on the rebound one.
        bind = getattr(self.inner, "__agents_bind_function_tool__", None)
        return TaggedInvoker(bind(function_tool)) if callable(bind) else self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def tagged(tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose HTTP effects carry the model's tool call id."""
    if isinstance(tool.on_invoke_tool, TaggedInvoker):
        return tool
    tagged_tool = copy.copy(tool)
    tagged_tool.on_invoke_tool = TaggedInvoker(tagged_tool.on_invoke_tool)
    return tagged_tool


def tagged_tools(tools: Iterable[Any]) -> list[Any]:
    """``tools`` with each function tool ``tagged``; other tools (hosted, MCP) as they are."""
    return [tagged(tool) if isinstance(tool, FunctionTool) else tool for tool in tools]


def mcp_meta(call: MCPToolMetaContext) -> dict[str, str]:
    """A ``tool_meta_resolver`` for an MCP server: each tool call's ``_meta`` names the batch
    (and step) of the context and the model's own tool call id, which a replayed generation
    gives back unchanged, so a re-run's call of the tool is the first one's.

    ``tagged_tools`` cannot do this for MCP tools: the MCP client sends from a task of its own,
    which never sees the context entered around the call.
    """
    meta = agent.mcp_meta()
    tool_call_id = getattr(call.run_context, "tool_call_id", None)
    if isinstance(tool_call_id, str) and tool_call_id:
        meta[agent.MCP_META[agent.TOOL_CALL_HEADER]] = tool_call_id
    return meta
