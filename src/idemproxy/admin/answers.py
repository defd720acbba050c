"""Reading the admin API's answers: the JSON document an answer carries, the refusal a problem
document stands for, and why a call got no answer at all, in the CLI's words."""

from __future__ import annotations

import os

import orjson
from aiohttp import ClientConnectorError, ServerDisconnectedError

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.documents import Document
from idemproxy.proxy.problems import PROBLEM_TYPE_BASE

TIMEOUT_S = 30.0
_JSON_TYPES = frozenset({"application/json", "application/problem+json"})


def reason(exc: BaseException) -> str:
    """Why a call got no answer, in a few words rather than aiohttp's."""
    if isinstance(exc, ClientConnectorError):
        number = exc.os_error.errno
        return os.strerror(number).lower() if number else str(exc.os_error) or "cannot connect"
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_S:g} s"
    if isinstance(exc, ServerDisconnectedError):
        return "the connection closed without an answer"
    return str(exc) or type(exc).__name__


def answer_document(raw: bytes, content_type: str) -> Document | None:
    """The JSON object an answer carries; None if it carries none (not the admin API)."""
    if content_type not in _JSON_TYPES:
        return None
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) else None


def refusal(status: int, document: Document, retry_after: str) -> RequestRefused:
    """The problem document an error answer carries, as the refusal it stands for."""
    code_text = str(document.pop("type", "")).removeprefix(PROBLEM_TYPE_BASE)
    try:
        code = ProblemCode(code_text)
    except ValueError:
        code = ProblemCode.INVALID_REQUEST
    detail = str(document.pop("detail", f"the admin API answered {status}"))
    for name in ("title", "status", "effect_key"):
        document.pop(name, None)
    retry_after_s = int(retry_after) if retry_after.isdigit() else None
    return RequestRefused(code, detail, retry_after_s=retry_after_s, extra=document)
