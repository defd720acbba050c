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

An MCP client sends its requests from a task of its own, so give each tool call its identity
in the call itself: ``client.call_tool(name, arguments, meta=agent.mcp_meta())`` (docs/mcp.md).

Before re-running a batch that crashed, ask the proxy what it already did and tell the LLM::

    context = agent.recovery_context("batch-7")  # None: the proxy has no record of it
    if context is not None:
        messages.insert(0, {"role": "system", "content": context.text})

It reads the proxy listener (``IDEMPROXY_URL``, default http://127.0.0.1:8080) with the
standard library alone; ``recovery_context_async`` runs it in a thread for asyncio code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

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


# Where an MCP tool call carries the same identity in its request (mcpcalls.py): per call, since
# an MCP client sends from a task of its own, which never sees the caller's context.
MCP_META = {
    AGENT_HEADER: "dev.idemproxy/agent",
    BATCH_HEADER: "dev.idemproxy/batch",
    TOOL_CALL_HEADER: "dev.idemproxy/toolCall",
    STEP_HEADER: "dev.idemproxy/step",
    ACTION_HEADER: "dev.idemproxy/action",
}


def mcp_meta() -> dict[str, str]:
    """The current context as an MCP request's ``_meta``:
    ``await client.call_tool("send_message", args, meta=agent.mcp_meta())``."""
    return {MCP_META[name]: value for name, value in headers().items()}


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


PROXY_URL_VARIABLE = "IDEMPROXY_URL"
DEFAULT_PROXY_URL = "http://127.0.0.1:8080"
# The proxy's own prefix, which no upstream name can take (admin/agent_context.py).
CONTEXT_PATH = "/_idemproxy/v1/batches/{batch}/context"
NOT_FOUND_OUTCOME = "not-found"


class RecoveryContextError(Exception):
    """The proxy could not be reached, or refused to give the context (the detail says why)."""


@dataclass(frozen=True, slots=True)
class RecoveryContext:
    """What a batch already did, as the proxy recorded it (docs/recovery.md, "The agent's
    recovery context"). Each action is a dict with ``tool_call``, ``action``, ``upstream``,
    ``method``, ``path`` (secret parts redacted), ``status``, ``external_id``, ``summary`` and
    ``retryable``."""

    agent: str
    batch: str
    strategy: str  # restart_batch, selective, manual_only or abandon
    advice: str  # what the strategy means for the agent
    completed: tuple[dict[str, Any], ...]
    unknown: tuple[dict[str, Any], ...]  # may or may not have happened: never repeat them
    failed: tuple[dict[str, Any], ...]
    pending: tuple[dict[str, Any], ...]  # being sent right now
    compensated: tuple[dict[str, Any], ...]  # undone by an operator: a repeat is refused
    text: str  # all of it, for a system message


def recovery_context(
    batch_id: str,
    *,
    base_url: str | None = None,
    agent: str | None = None,
    timeout_s: float = 10.0,
) -> RecoveryContext | None:
    """The recovery context of batch ``batch_id``; None when the proxy has no record of it.

    ``base_url`` is the proxy listener (default ``$IDEMPROXY_URL`` or http://127.0.0.1:8080);
    ``agent`` names the agent where the sidecar lets it (default: the current
    ``agent.batch(..., agent=...)``, else the sidecar's own). Raises
    :class:`RecoveryContextError` when the proxy cannot be reached or refuses.
    """
    # Imported here: importing this module must cost no HTTP machinery.
    import urllib.error
    import urllib.request

    base = (base_url or os.environ.get(PROXY_URL_VARIABLE) or DEFAULT_PROXY_URL).rstrip("/")
    url = base + CONTEXT_PATH.format(batch=quote(_checked(BATCH_HEADER, batch_id), safe=""))
    named = agent or headers().get(AGENT_HEADER)
    sent = {"Accept": "application/json"}
    if named:
        sent[AGENT_HEADER] = _checked(AGENT_HEADER, named)
    if not url.startswith(("http://", "https://")):
        raise RecoveryContextError(f"{base!r} is not an http(s) URL; set {PROXY_URL_VARIABLE}")
    request = urllib.request.Request(url, headers=sent, method="GET")  # noqa: S310 - http(s) only
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
            return _context(json.loads(answer.read()))
    except urllib.error.HTTPError as refused:
        if refused.headers.get("Idem-Outcome") == NOT_FOUND_OUTCOME:
            return None
        raise RecoveryContextError(f"the proxy at {base} refused: {_detail(refused)}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise RecoveryContextError(
            f"cannot reach the proxy at {base} ({exc}); is it running? Set {PROXY_URL_VARIABLE}"
            " to its listener"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise RecoveryContextError(f"{base} did not answer a recovery context: {exc!r}") from exc


async def recovery_context_async(
    batch_id: str,
    *,
    base_url: str | None = None,
    agent: str | None = None,
    timeout_s: float = 10.0,
) -> RecoveryContext | None:
    """:func:`recovery_context` in a worker thread, which keeps the current context."""
    return await asyncio.to_thread(
        recovery_context, batch_id, base_url=base_url, agent=agent, timeout_s=timeout_s
    )


def _context(document: dict[str, Any]) -> RecoveryContext:
    def actions(name: str) -> tuple[dict[str, Any], ...]:
        return tuple(dict(item) for item in document[name])

    return RecoveryContext(
        agent=str(document["agent"]),
        batch=str(document["batch"]),
        strategy=str(document["strategy"]),
        advice=str(document["advice"]),
        completed=actions("completed"),
        unknown=actions("unknown"),
        failed=actions("failed"),
        pending=actions("pending"),
        # Absent from a proxy older than compensated marks: nothing of the batch was undone.
        compensated=tuple(dict(item) for item in document.get("compensated", ())),
        text=str(document["text"]),
    )


def _detail(refused: Any) -> str:
    try:
        return str(json.loads(refused.read())["detail"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {refused.code}"
