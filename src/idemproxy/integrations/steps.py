"""A per-batch step counter: each LLM call of a batch is one effect, numbered in call order.

A generation is keyed by the batch, the tool call ``llm`` and ``Idem-Step`` n, the n-th LLM call
of the batch. A re-run that asks the same questions in the same order gets generation n replayed
for its n-th call, so the model "answers" with the same tool calls and their ids, and the tools'
effects (keyed by those ids) are replayed too instead of made again::

    from idemproxy.integrations import steps

    with steps.batch("batch-7"):
        with steps.generation():      # Idem-Tool-Call: llm, Idem-Step: 1
            reply = llm(messages)
        for call in reply.tool_calls:
            with steps.tool_call(call.id):
                run(call)             # keyed by the model's own tool call id

The count lives in the batch's context: asyncio tasks and ``asyncio.to_thread`` share it, and a
new ``steps.batch`` (a restarted agent's) starts again at 1. LLM calls made concurrently are
numbered in the order they start, which a re-run may not repeat: keep a batch's LLM calls in
sequence, or give each its own step with ``agent.tool_call("llm", step=...)``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar

from idemproxy import agent

# The tool call every generation of a batch belongs to; Idem-Step tells them apart. Model
# tool-call ids ("call_...", "toolu_...") never take this value.
GENERATIONS = "llm"


class StepCounter:
    """The numbers 1, 2, 3... handed out once each, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last += 1
            return self._last


_counter: ContextVar[StepCounter | None] = ContextVar("idemproxy_step_counter", default=None)


@contextlib.contextmanager
def batch(batch_id: str, *, agent_id: str | None = None) -> Iterator[StepCounter]:
    """``agent.batch(batch_id)`` with a fresh generation count: the first LLM call is step 1."""
    with agent.batch(batch_id, agent=agent_id):
        counter = StepCounter()
        token = _counter.set(counter)
        try:
            yield counter
        finally:
            _counter.reset(token)


def next_step() -> int:
    """The step of the batch's next LLM call."""
    counter = _counter.get()
    if counter is None:
        raise RuntimeError(
            "enter steps.batch(...) before an LLM call: generations are numbered per batch"
        )
    return counter.next()


def generation() -> contextlib.AbstractContextManager[None]:
    """Calls inside are the batch's next generation (one LLM call and its SDK retries)."""
    return agent.tool_call(GENERATIONS, step=str(next_step()))


def tool_call(call_id: str) -> contextlib.AbstractContextManager[None]:
    """Calls inside belong to the model's tool call ``call_id`` (replayed with the generation)."""
    return agent.tool_call(call_id)
