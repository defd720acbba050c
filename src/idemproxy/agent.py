"""The agent side: ``Idem-*`` headers for a batch and tool call, from context variables.

An agent marks where it is in its work, and every HTTP call made inside carries the identity
idemproxy keys the effect by (SPEC 3)::

    from idemproxy import agent

    with agent.batch("batch-7"):
        for call in tool_calls:
            with agent.tool_call(call.id):
                run(call)  # every request sent in here carries Idem-Batch and Idem-Tool-Call

Context variables follow ``asyncio`` tasks (each task starts with a copy of its creator's
context) and ``asyncio.to_thread``; a plain thread starts empty, so enter the context there.
Nothing here imports an HTTP library; hook it into yours:

- httpx: ``httpx.Client(event_hooks={"request": [agent.httpx_hook]})``, or for
  ``httpx.AsyncClient`` ``event_hooks={"request": [agent.httpx_async_hook]}``.
- aiohttp (3.12+): ``aiohttp.ClientSession(middlewares=(agent.aiohttp_middleware,))``.
- requests: ``session.auth = agent.RequestsAuth()`` (it wraps an auth you already use:
  ``agent.RequestsAuth(requests.auth.HTTPBasicAuth("user", "pass"))``).
- OpenAI SDK: ``openai.OpenAI(base_url=".../openai/v1", http_client=httpx2.Client(
  event_hooks={"request": [agent.httpx_hook]}))`` (openai 3 is built on httpx2, whose hooks are
  httpx's; earlier versions take an ``httpx.Client``), or per call
  ``client.chat.completions.create(..., extra_headers=agent.headers())``.

Headers a request already carries win: a call that sets its own ``Idem-Step`` keeps it.
docs/recovery.md shows each integration in full.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextvars import ContextVar
from typing import Any

AGENT_HEADER = "Idem-Agent"
BATCH_HEADER = "Idem-Batch"
TOOL_CALL_HEADER = "Idem-Tool-Call"
STEP_HEADER = "Idem-Step"
ACTION_HEADER = "Idem-Action"

# What the proxy accepts in these headers (effectkeys.py): 1-255 visible ASCII characters.
_ID = re.compile(r"[\x21-\x7e]{1,255}")

_current: ContextVar[dict[str, str] | None] = ContextVar("idemproxy_agent_headers", default=None)


def _checked(header: str, value: str) -> str:
    if not _ID.fullmatch(value):
        raise ValueError(
            f"{header} must be 1-255 visible ASCII characters without spaces, not {value!r};"
            " use a stable id such as a UUID"
        )
    return value


@contextlib.contextmanager
def _with(**headers: str | None) -> Iterator[None]:
    current = dict(_current.get() or {})
    current.update({name: _checked(name, value) for name, value in headers.items() if value})
    token = _current.set(current)
    try:
        yield
    finally:
        _current.reset(token)


def batch(batch_id: str, *, agent: str | None = None) -> contextlib.AbstractContextManager[None]:
    """Calls inside belong to batch ``batch_id`` (of ``agent``, if the sidecar allows naming)."""
    return _with(**{BATCH_HEADER: batch_id, AGENT_HEADER: agent})


def tool_call(
    call_id: str, *, step: str | None = None, action: str | None = None
) -> contextlib.AbstractContextManager[None]:
    """Calls inside belong to tool call ``call_id`` of the current batch.

    ``step`` tells apart several effects of one tool call when their requests could be alike;
    ``action`` is a label for operators (default: the route's name).
    """
    if BATCH_HEADER not in (_current.get() or {}):
        raise RuntimeError("enter agent.batch(...) before agent.tool_call(...)")
    return _with(**{TOOL_CALL_HEADER: call_id, STEP_HEADER: step, ACTION_HEADER: action})


def step(step_id: str) -> contextlib.AbstractContextManager[None]:
    """Calls inside are effect ``step_id`` of the current tool call."""
    if TOOL_CALL_HEADER not in (_current.get() or {}):
        raise RuntimeError("enter agent.tool_call(...) before agent.step(...)")
    return _with(**{STEP_HEADER: step_id})


def headers() -> dict[str, str]:
    """The ``Idem-*`` headers of the current context (empty outside any batch)."""
    return dict(_current.get() or {})


def apply(target: MutableMapping[str, str]) -> None:
    """Add the current headers to ``target`` where it has none of that name already.

    ``target`` must look names up case-insensitively, as every HTTP library's headers do.
    """
    for name, value in headers().items():
        if name not in target:
            target[name] = value


def httpx_hook(request: Any) -> None:
    """An httpx ``request`` event hook (sync clients)."""
    apply(request.headers)


async def httpx_async_hook(request: Any) -> None:
    """An httpx ``request`` event hook (``AsyncClient``)."""
    apply(request.headers)


async def aiohttp_middleware(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
    """An aiohttp client middleware (aiohttp 3.12 and later)."""
    apply(request.headers)
    return await handler(request)


class RequestsAuth:
    """A requests ``auth`` that adds the headers, after the auth it wraps (if any) ran."""

    def __init__(self, inner: Callable[[Any], Any] | None = None) -> None:
        self._inner = inner

    def __call__(self, request: Any) -> Any:
        if self._inner is not None:
            request = self._inner(request)
        apply(request.headers)
        return request
