"""LangChain and LangGraph with stable ids for chat model calls and tool calls.

One callback handler does both: a chat model's call is the batch's next generation
(``steps.generation``), and a tool run for a model's tool call carries that call's id
(``ToolCall["id"]``, the ``tool_call_id`` of its ``ToolMessage``) as ``Idem-Tool-Call``::

    import httpx, httpx2
    from langchain_openai import ChatOpenAI
    from idemproxy import agent
    from idemproxy.integrations import langchain, steps

    model = ChatOpenAI(
        base_url="http://127.0.0.1:8080/openai/v1",
        http_client=httpx2.Client(event_hooks={"request": [agent.httpx_hook]}),
    )
    with steps.batch("batch-7"):
        graph.invoke(inputs, config={"callbacks": [langchain.IdemCallbackHandler()]})

The handler runs inline (``run_inline``), in the context the model and the tool then run in, so
the context variables it sets reach their HTTP calls; it ends each at the run's end or error.
"""

from __future__ import annotations

import contextlib
from typing import Any
from uuid import UUID

from idemproxy.integrations import steps

try:
    from langchain_core.callbacks import BaseCallbackHandler
except ImportError as missing:  # pragma: no cover - only without LangChain installed
    raise ImportError(
        "idemproxy.integrations.langchain needs LangChain: pip install langchain-core"
    ) from missing


class IdemCallbackHandler(BaseCallbackHandler):
    """Steps chat model calls and tags tool runs with their tool call id."""

    run_inline = True
    raise_error = True

    def __init__(self) -> None:
        self._open: dict[UUID, contextlib.AbstractContextManager[None]] = {}

    def _enter(self, run_id: UUID, scope: contextlib.AbstractContextManager[None]) -> None:
        scope.__enter__()
        self._open[run_id] = scope

    def _exit(self, run_id: UUID) -> None:
        scope = self._open.pop(run_id, None)
        if scope is not None:
            # Ended in another context than it began in (a framework that copies contexts):
            # the variable lives on only in that finished context, which nothing reads again.
            with contextlib.suppress(ValueError):
                scope.__exit__(None, None, None)

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._enter(run_id, steps.generation())

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._enter(run_id, steps.generation())

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._exit(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._exit(run_id)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # A tool invoked by hand, not for a model's tool call, has no id to key it by: its
        # requests go as the surrounding context tags them.
        if tool_call_id:
            self._enter(run_id, steps.tool_call(tool_call_id))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._exit(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._exit(run_id)
