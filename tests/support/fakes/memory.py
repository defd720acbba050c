"""A memory-block API of the kind agent frameworks keep their notes in: text blocks that grow
by appends.

- ``GET /v1/blocks/{id}``: ``{"id": ..., "value": ...}``, 404 for a block never written
- ``POST /v1/blocks/{id}/append`` with ``{"text": ...}``: adds the text at the end, answers the
  block as it then stands

A test may cut the next append short (``cut_next_after_chars``): the fake keeps only that
many characters of the text, then drops the connection without an answer, as a server that
dies mid-write does.
"""

from __future__ import annotations

from aiohttp import web

from tests.support.fakes.service import Service, cut, json_answer, perform


class MemoryService(Service):
    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[str, str] = {}
        self.cut_next_after_chars: int | None = None

    def appends(self) -> list[str]:
        """The texts of every append request received, in order."""
        return [str(effect["text"]) for effect in self.effects]


MEMORY = web.AppKey("memory", MemoryService)


def _block(block_id: str, value: str) -> dict[str, str]:
    return {"id": block_id, "value": value}


async def read_block(request: web.Request) -> web.Response:
    service = request.app[MEMORY]
    await service.record(request)
    block_id = request.match_info["id"]

    def read() -> web.Response:
        if block_id not in service.blocks:
            return json_answer({"error": "no such block"}, status=404)
        return json_answer(_block(block_id, service.blocks[block_id]))

    return await perform(request, service, "read", read)


async def append(request: web.Request) -> web.Response:
    service = request.app[MEMORY]
    payload = (await request.json()) if await service.record(request) else {}
    block_id, text = request.match_info["id"], str(payload.get("text", ""))
    service.effects.append({"block": block_id, "text": text})
    if service.cut_next_after_chars is not None:
        kept, service.cut_next_after_chars = service.cut_next_after_chars, None
        service.blocks[block_id] = service.blocks.get(block_id, "") + text[:kept]
        return await cut(request)

    def apply() -> web.Response:
        service.blocks[block_id] = service.blocks.get(block_id, "") + text
        return json_answer(_block(block_id, service.blocks[block_id]))

    return await perform(request, service, "append", apply)


def build_memory_app() -> web.Application:
    app = web.Application()
    app[MEMORY] = MemoryService()
    app.router.add_get("/v1/blocks/{id}", read_block)
    app.router.add_post("/v1/blocks/{id}/append", append)
    return app
