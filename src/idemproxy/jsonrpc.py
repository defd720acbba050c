"""JSON-RPC 2.0 as MCP's streamable HTTP carries it: the message a POST holds, and the answer to
one request found in a JSON or SSE response body.

Knows nothing of effects: the MCP policy (policies/mcp.py) says what a message means, and the
effect flow what its answer settles (effects/envelope.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

JSONRPC_VERSION = "2.0"
EVENT_STREAM_TYPE = "text/event-stream"

# A JSON-RPC id: a string or a number (null only in an error about an unreadable request).
RequestId = str | int | float | None


@dataclass(frozen=True, slots=True)
class Message:
    """One JSON-RPC message: a request (``method`` and ``id``), a notification (``method``, no
    id) or an answer to a request of the other side (``result`` or ``error``, no method)."""

    method: str | None
    has_id: bool
    id: RequestId = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.has_id


@dataclass(frozen=True, slots=True)
class Batch:
    """A JSON array of messages, which MCP revisions since 2025-06-18 no longer allow."""

    messages: tuple[Message, ...]


def parse(body: bytes) -> Message | Batch | None:
    """The message (or batch) ``body`` holds; None when it is no JSON-RPC at all, which the
    server, not the proxy, answers."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(document, list):
        messages = [_message(item) for item in document]
        if not messages or any(message is None for message in messages):
            return None
        return Batch(tuple(message for message in messages if message is not None))
    return _message(document)


def _message(document: object) -> Message | None:
    if not isinstance(document, dict) or document.get("jsonrpc") != JSONRPC_VERSION:
        return None
    method = document.get("method")
    if method is not None and not isinstance(method, str):
        return None
    params = document.get("params")
    request_id = document.get("id")
    if not isinstance(request_id, str | int | float) or isinstance(request_id, bool):
        request_id = None
    return Message(
        method=method,
        has_id="id" in document,
        id=request_id,
        params=params if isinstance(params, dict) else {},
    )


def answer_to(body: bytes, content_type: str, request_id: RequestId) -> dict[str, Any] | None:
    """The answer (a ``result`` or an ``error``) to the request ``request_id`` in a response
    body: a JSON document, or the ``data`` of an SSE stream's events, where the server's
    notifications and requests to the client come before it. None when the body holds none:
    a stream that ended, or was cut, before the answer."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    documents = _event_data(body) if media_type == EVENT_STREAM_TYPE else iter((body,))
    for data in documents:
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        for candidate in document if isinstance(document, list) else (document,):
            if _answers(candidate, request_id):
                answer: dict[str, Any] = candidate
                return answer
    return None


def _answers(candidate: object, request_id: RequestId) -> bool:
    return (
        isinstance(candidate, dict)
        and "method" not in candidate
        and ("result" in candidate or "error" in candidate)
        and candidate.get("id") == request_id
    )


def _event_data(body: bytes) -> Iterator[bytes]:
    """Each complete SSE event's ``data`` (its ``data:`` lines joined by newlines). An event
    still open when the body ends is no event: the stream was cut inside it."""
    lines: list[bytes] = []
    for line in body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[:-1]:
        if not line:
            if lines:
                yield b"\n".join(lines)
            lines = []
        elif line.startswith(b"data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(b" ") else value)
    # Whatever is left had no blank line after it: the stream stopped mid-event.


def with_id(answer: dict[str, Any], request_id: RequestId) -> bytes:
    """``answer`` as the answer to the request ``request_id``: a recorded result replayed to a
    repeat, which the client matches to its request by that id alone."""
    return orjson.dumps({**answer, "id": request_id})


def error(request_id: RequestId, code: int, message: str, data: object = None) -> bytes:
    """A JSON-RPC error answer."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return orjson.dumps({"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": body})


def error_code(answer: dict[str, Any]) -> int | None:
    """The code of an error answer; None for a result."""
    body = answer.get("error")
    if not isinstance(body, dict):
        return None
    code = body.get("code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def result_of(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer.get("result")
    return result if isinstance(result, dict) else {}


def failed(answer: dict[str, Any]) -> bool:
    """Whether an answer reports a failure: a JSON-RPC error, or an MCP tool's ``isError``
    result."""
    return error_code(answer) is not None or result_of(answer).get("isError") is True


def error_text(answer: dict[str, Any]) -> str:
    """What a failed answer says: a JSON-RPC error's message, or the text of an ``isError``
    result's content."""
    error = answer.get("error")
    if isinstance(error, dict):
        return str(error.get("message", ""))
    content = result_of(answer).get("content")
    blocks = content if isinstance(content, list) else []
    return " ".join(str(block.get("text", "")) for block in blocks if isinstance(block, dict))
