"""Slack's Web API and the OpenAI and Anthropic generation APIs, as far as agents use them."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import parse_qsl

import orjson
from aiohttp import web

from tests.support.fakes.service import Service, form_parts, json_answer, perform


class ChatService(Service):
    def __init__(self) -> None:
        super().__init__()
        self._numbers = itertools.count(1)

    def next_number(self) -> int:
        return next(self._numbers)

    def made(self, params: dict[str, Any], answer: dict[str, Any]) -> web.Response:
        """Count the effect (with the request that made it) and answer with it."""
        self.effects.append({"request": orjson.dumps(params).decode(), "answer": answer})
        return json_answer(answer)

    def made_for(self, fragment: str) -> list[dict[str, Any]]:
        """The answers of the effects whose request holds ``fragment``."""
        return [effect["answer"] for effect in self.effects if fragment in effect["request"]]


CHAT = web.AppKey("chat", ChatService)


def _params(request: web.Request, body: bytes) -> dict[str, Any]:
    if request.content_type == "application/json":
        document: dict[str, Any] = orjson.loads(body)
        return document
    return dict(parse_qsl(body.decode()))


async def slack_post_message(request: web.Request) -> web.Response:
    service = request.app[CHAT]
    params = _params(request, await service.record(request))

    def apply() -> web.Response:
        ts = f"1767225600.{service.next_number():06d}"
        message = {"type": "message", "text": params.get("text", ""), "ts": ts, "bot_id": "B1"}
        answer = {"ok": True, "channel": params["channel"], "ts": ts, "message": message}
        return service.made(params, answer)

    return await perform(request, service, "message", apply)


async def slack_auth_test(request: web.Request) -> web.Response:
    await request.app[CHAT].record(request)
    return json_answer({"ok": True, "user_id": "U1", "team_id": "T1", "bot_id": "B1"})


async def openai_chat(request: web.Request) -> web.Response:
    service = request.app[CHAT]
    params = _params(request, await service.record(request))

    def apply() -> web.Response:
        number = service.next_number()
        completion = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1767225600 + number,
            "model": params["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"generation {number}"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
        return service.made(params, completion)

    return await perform(request, service, "generate", apply)


async def anthropic_messages(request: web.Request) -> web.Response:
    service = request.app[CHAT]
    params = _params(request, await service.record(request))

    def apply() -> web.Response:
        number = service.next_number()
        message = {
            "id": f"msg_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": params["model"],
            "content": [{"type": "text", "text": f"generation {number}"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 2},
        }
        return service.made(params, message)

    return await perform(request, service, "generate", apply)


async def openai_upload_file(request: web.Request) -> web.Response:
    service = request.app[CHAT]
    parts = form_parts(request.headers["Content-Type"], await service.record(request))
    filename, content = parts["file"]

    def apply() -> web.Response:
        number = service.next_number()
        uploaded = {
            "id": f"file-{number:04d}",
            "object": "file",
            "bytes": len(content),
            "created_at": 1767225600 + number,
            "filename": filename,
            "purpose": parts["purpose"][1].decode(),
            "status": "processed",
        }
        request_part = {"filename": filename, "content": content.decode("utf-8", "replace")}
        return service.made(request_part, uploaded)

    return await perform(request, service, "upload", apply)


async def list_models(request: web.Request) -> web.Response:
    await request.app[CHAT].record(request)
    model = {"id": "model-1", "object": "model", "created": 1767225600, "owned_by": "test"}
    anthropic_model = {"id": "model-1", "type": "model", "display_name": "Model 1"}
    anthropic_model["created_at"] = "2026-01-01T00:00:00Z"
    return json_answer(
        {"object": "list", "data": [{**model, **anthropic_model}], "has_more": False,
         "first_id": "model-1", "last_id": "model-1"}
    )  # fmt: skip


def build_chat_app() -> web.Application:
    """One app for the three: each upstream is configured with its own path prefix."""
    app = web.Application()
    app[CHAT] = ChatService()
    app.router.add_post("/slack/api/chat.postMessage", slack_post_message)
    app.router.add_post("/slack/api/auth.test", slack_auth_test)
    app.router.add_post("/openai/v1/chat/completions", openai_chat)
    app.router.add_get("/openai/v1/models", list_models)
    app.router.add_post("/openai/v1/files", openai_upload_file)
    app.router.add_post("/anthropic/v1/messages", anthropic_messages)
    app.router.add_get("/anthropic/v1/models", list_models)
    return app
