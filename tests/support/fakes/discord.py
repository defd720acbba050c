"""A Discord HTTP API that honours an enforced ``nonce`` like the real one.

A message create with ``enforce_nonce: true`` and a nonce already used in this channel within
``nonce_window_s`` answers with the message that nonce made, and creates nothing.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import orjson
from aiohttp import web

from tests.support.fakes.service import Service, fake_app, form_parts, json_answer, perform

BOT = {
    "id": "1100000000000000001",
    "username": "idem-bot",
    "discriminator": "0",
    "global_name": None,
    "avatar": None,
    "bot": True,
}
# Discord answers through Google's front end; discord.py reads a 429 without Via as a ban.
_VIA = {"Via": "1.1 google"}


class DiscordService(Service):
    def __init__(self, nonce_window_s: float = 300.0) -> None:
        super().__init__()
        self.nonce_window_s = nonce_window_s
        self.messages: list[dict[str, Any]] = []
        self.nonces: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self.deleted: list[str] = []  # ids of the messages deleted, in order
        self._ids = itertools.count(1)


DISCORD = web.AppKey("discord", DiscordService)


def _message(channel_id: str, payload: dict[str, Any], number: int) -> dict[str, Any]:
    return {
        "id": str(1200000000000000000 + number),
        "channel_id": channel_id,
        "type": 0,
        "author": BOT,
        "content": payload.get("content", ""),
        "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "flags": 0,
        "nonce": payload.get("nonce"),
    }


async def me(request: web.Request) -> web.Response:
    await request.app[DISCORD].record(request)
    return json_answer(BOT, headers=_VIA)


async def application(request: web.Request) -> web.Response:
    await request.app[DISCORD].record(request)
    info = {
        "id": BOT["id"],
        "name": "idem-bot",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": BOT,
        "verify_key": "0" * 64,
        "flags": 0,
    }
    return json_answer(info, headers=_VIA)


async def create_message(request: web.Request) -> web.Response:
    service = request.app[DISCORD]
    body = await service.record(request)
    if not request.headers.get("Authorization", "").startswith("Bot "):
        return json_answer({"message": "401: Unauthorized", "code": 0}, status=401)
    attachments: list[dict[str, Any]] = []
    if request.content_type == "multipart/form-data":
        # Sends with files: the JSON is the payload_json part, each file a files[N] part.
        parts = form_parts(request.headers["Content-Type"], body)
        payload: dict[str, Any] = orjson.loads(parts.pop("payload_json")[1])
        for number, (name, (filename, content)) in enumerate(sorted(parts.items())):
            url = f"https://cdn.discordapp.com/attachments/0/{number}/{filename or name}"
            attachments.append({"id": str(number), "filename": filename or name,
                                "size": len(content), "url": url, "proxy_url": url})  # fmt: skip
    else:
        payload = orjson.loads(body)
    channel_id = request.match_info["channel_id"]
    nonce = str(payload.get("nonce", ""))
    if payload.get("enforce_nonce") and nonce:
        used = service.nonces.get((channel_id, nonce))
        if used is not None and time.monotonic() - used[0] < service.nonce_window_s:
            return json_answer(used[1], headers=_VIA)

    def apply() -> web.Response:
        message = _message(channel_id, payload, next(service._ids))
        message["attachments"] = attachments
        service.messages.append(message)
        service.effects.append(message)
        if nonce:
            service.nonces[(channel_id, nonce)] = (time.monotonic(), message)
        return json_answer(message, headers=_VIA)

    return await perform(request, service, "message", apply)


async def delete_message(request: web.Request) -> web.Response:
    service = request.app[DISCORD]
    await service.record(request)
    if not request.headers.get("Authorization", "").startswith("Bot "):
        return json_answer({"message": "401: Unauthorized", "code": 0}, status=401)
    message_id = request.match_info["message_id"]
    live = [m for m in service.messages if m["id"] == message_id and m["id"] not in service.deleted]
    if not live:
        return json_answer({"message": "Unknown Message", "code": 10008}, status=404)

    def apply() -> web.Response:
        service.deleted.append(message_id)
        return web.Response(status=204, headers=_VIA)

    return await perform(request, service, "delete", apply)


def build_discord_app(nonce_window_s: float = 300.0, *, gzip: bool = False) -> web.Application:
    app = fake_app(gzip=gzip)
    app[DISCORD] = DiscordService(nonce_window_s)
    app.router.add_get("/api/v10/users/@me", me)
    app.router.add_get("/api/v10/oauth2/applications/@me", application)
    app.router.add_post("/api/v10/channels/{channel_id}/messages", create_message)
    app.router.add_delete("/api/v10/channels/{channel_id}/messages/{message_id}", delete_message)
    return app
