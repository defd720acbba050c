"""What an operator reads of a held request before approving it: never a secret.

Headers are left out whole (credentials travel there), a route's secret path parameters show
as ``{name}``, and body fields whose names say they hold a secret (a password, a token, a card
number or its code) show as ``"[redacted]"``. What is left is cut to the length an approval
keeps.
"""

from __future__ import annotations

import re

import orjson

from idemproxy.effects.context import EffectContext
from idemproxy.policies.approval import UNREADABLE
from idemproxy.policies.secretpaths import shown_path
from idemproxy.policies.subject import body_document
from idemproxy.store.approvals import MAX_SUMMARY_CHARS

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(
    r"(pass(word)?|secret|token|api[_-]?key|auth|credential|cvc|cvv|card[_-]?number|^number$)",
    re.IGNORECASE,
)


def request_summary(ctx: EffectContext) -> str:
    """The held request as JSON text: method, upstream, path, tool and body, secrets out."""
    document = body_document(ctx.body, ctx.request.headers.get("Content-Type", ""))
    summary: dict[str, object] = {
        "method": ctx.request.method,
        "upstream": ctx.target.upstream.name,
        "path": shown_path(ctx.route, ctx.target.path),
    }
    if ctx.tool:
        summary["tool"] = ctx.tool
    if document is UNREADABLE:
        summary["body"] = f"({len(ctx.body)} bytes that are neither JSON nor a form)"
    elif ctx.body:
        summary["body"] = redacted(document)
    text = orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode()
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1] + "…"
    return text


def redacted(node: object) -> object:
    """``node`` with the values of secret-named members replaced, at any depth."""
    if isinstance(node, dict):
        return {
            name: REDACTED if _SECRET_NAME.search(str(name)) else redacted(value)
            for name, value in node.items()
        }
    if isinstance(node, list):
        return [redacted(item) for item in node]
    return node
