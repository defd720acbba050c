"""A fake upstream API that counts every effect it receives.

Used in-process by unit tests and as a subprocess (``python -m tests.support.upstream PORT``)
by end-to-end tests, which read the counts back from ``GET /_effects``.

Endpoints (all under any prefix the test chooses):
- ``POST /messages``: an effect; answers 200 JSON ``{"id": N, "received": <body>}``.
- ``POST /status/{code}``: an effect answered with that status.
- ``POST /hang``: an effect that never gets an answer (until the test releases it).
- ``POST /drop``: an effect after which the connection is cut without an answer.
- ``POST /slow?ms=N``: an effect answered after N ms.
- ``GET|POST /sse?events=N&gap_ms=M``: a text/event-stream of N events.
- ``GET /big?bytes=N``: N bytes of body.
- ``GET /headers``: the request headers it received, as JSON.
- ``POST /mcp``: a JSON-RPC endpoint in MCP's manner, for faults the real SDK server cannot be
  made to show: a ``tools/call`` counts as an effect and is answered with the count, as JSON,
  or with ``?sse=1`` as an event stream after a progress notification; ``?cut=1`` cuts that
  stream before the answer; ``?answer=...`` answers any message with that JSON ``result``.
  Other messages are answered ``{}`` and not counted.
- ``GET /_effects``: what was received, for tests in another process.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field

import orjson
from aiohttp import web


@dataclass
class Effect:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]


@dataclass
class EffectLog:
    effects: list[Effect] = field(default_factory=list)
    release_hang: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, path_suffix: str = "") -> int:
        return sum(1 for effect in self.effects if effect.path.endswith(path_suffix))


EFFECTS = web.AppKey("effects", EffectLog)


async def _record(request: web.Request) -> Effect:
    effect = Effect(
        request.method, request.path, await request.read(), dict(request.headers.items())
    )
    request.app[EFFECTS].effects.append(effect)
    return effect


async def messages(request: web.Request) -> web.Response:
    effect = await _record(request)
    number = len(request.app[EFFECTS].effects)
    return web.json_response(
        {"id": str(number), "received": effect.body.decode("utf-8", "replace")},
        headers={"X-Request-Id": f"req-{number}", "Set-Cookie": "session=secret"},
    )


async def status(request: web.Request) -> web.Response:
    await _record(request)
    code = int(request.match_info["code"])
    return web.json_response({"status": code}, status=code)


async def hang(request: web.Request) -> web.Response:
    await _record(request)
    await request.app[EFFECTS].release_hang.wait()
    return web.json_response({"released": True})


async def drop(request: web.Request) -> web.Response:
    await _record(request)
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(0.05)
    return web.Response()


async def slow(request: web.Request) -> web.Response:
    await _record(request)
    await asyncio.sleep(int(request.query.get("ms", "100")) / 1000)
    return web.json_response({"slow": True, "n": len(request.app[EFFECTS].effects)})


async def sse(request: web.Request) -> web.StreamResponse:
    if request.method == "POST":
        await _record(request)
    events = int(request.query.get("events", "5"))
    gap_s = int(request.query.get("gap_ms", "20")) / 1000
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for index in range(events):
        await response.write(f'id: {index}\ndata: {{"token": "t{index}"}}\n\n'.encode())
        await asyncio.sleep(gap_s)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def big(request: web.Request) -> web.StreamResponse:
    size = int(request.query.get("bytes", "1048576"))
    chunk = b"x" * 65536
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.content_length = size
    await response.prepare(request)
    sent = 0
    while sent < size:
        piece = chunk[: size - sent]
        await response.write(piece)
        sent += len(piece)
    await response.write_eof()
    return response


async def headers(request: web.Request) -> web.Response:
    if request.method != "GET":
        await _record(request)
    return web.json_response(
        {"headers": [[k, v] for k, v in request.headers.items()], "path_qs": request.path_qs}
    )


async def effects(request: web.Request) -> web.Response:
    log = request.app[EFFECTS]
    return web.Response(
        body=orjson.dumps(
            [
                {
                    "method": e.method,
                    "path": e.path,
                    "body": e.body.decode("utf-8", "replace"),
                    # aiohttp decodes a gzip or deflate request body before the handler reads
                    # it: only the headers show what came on the wire.
                    "headers": {str(name): value for name, value in e.headers.items()},
                }
                for e in log.effects
            ]
        ),
        content_type="application/json",
    )


async def mcp(request: web.Request) -> web.StreamResponse:
    message = orjson.loads(await request.read())
    given = request.query.get("answer")
    if message.get("method") != "tools/call":
        result = orjson.loads(given) if given else {}
        return web.json_response({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
    await _record(request)
    count = len(request.app[EFFECTS].effects)
    result = orjson.loads(given) if given else {"content": [{"type": "text", "text": f"n={count}"}]}
    answer = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
    if "sse" not in request.query:
        return web.Response(body=answer, content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    await response.write(b"event: message\ndata: " + orjson.dumps(progress) + b"\n\n")
    if "cut" in request.query:
        assert request.transport is not None
        request.transport.close()
        return response
    await response.write(b"event: message\ndata: " + answer + b"\n\n")
    await response.write_eof()
    return response


def build_upstream_app() -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[EFFECTS] = EffectLog()
    app.router.add_get("/_effects", effects)
    app.router.add_post("/{prefix:.*}messages", messages)
    app.router.add_post("/{prefix:.*}status/{code}", status)
    app.router.add_post("/{prefix:.*}hang", hang)
    app.router.add_post("/{prefix:.*}drop", drop)
    app.router.add_post("/{prefix:.*}slow", slow)
    app.router.add_route("*", "/{prefix:.*}sse", sse)
    app.router.add_route("*", "/{prefix:.*}big", big)
    app.router.add_route("*", "/{prefix:.*}headers", headers)
    app.router.add_post("/{prefix:.*}mcp", mcp)
    return app


if __name__ == "__main__":
    app = build_upstream_app()
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, shutdown_timeout=0.5)
