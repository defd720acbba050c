"""An OpenAI-compatible chat completions API that plans one tool call per generation.

The model's plan: call ``post_update`` once for each of three updates, one tool call per
generation, then answer "done". It re-plans whenever it is asked: each generation it makes gets a
new serial, which goes into the tool call's id and its text. So a generation replayed by the
proxy hands back the tool call of the first run, while one generated again would name a new
tool call with new content, and its effect would be made a second time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

UPDATES = 3
TOOL = "post_update"


@dataclass
class Generation:
    headers: dict[str, str]
    request: dict[str, Any]
    answer: dict[str, Any]


@dataclass
class Planner:
    generations: list[Generation] = field(default_factory=list)

    def plan(self, request: dict[str, Any]) -> dict[str, Any]:
        serial = len(self.generations) + 1
        done = sum(1 for message in request["messages"] if message.get("role") == "tool")
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if done < UPDATES:
            arguments = {"text": f"update {done + 1} (plan {serial})"}
            message["tool_calls"] = [
                {
                    "id": f"call_plan{serial}",
                    "type": "function",
                    "function": {"name": TOOL, "arguments": orjson.dumps(arguments).decode()},
                }
            ]
            finish = "tool_calls"
        else:
            message["content"] = "done"
            finish = "stop"
        return {
            "id": f"chatcmpl-{serial}",
            "object": "chat.completion",
            "created": 1767225600 + serial,
            "model": request["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }


PLANNER = web.AppKey("planner", Planner)


async def chat_completions(request: web.Request) -> web.Response:
    planner = request.app[PLANNER]
    body: dict[str, Any] = orjson.loads(await request.read())
    if body.get("stream"):
        return web.json_response({"error": {"message": "this fake does not stream"}}, status=400)
    answer = planner.plan(body)
    headers = {name: value for name, value in request.headers.items()}
    planner.generations.append(Generation(headers, body, answer))
    return web.json_response(answer)


def build_planner_app() -> web.Application:
    """The API under ``/v1``: point the SDK's ``base_url`` at ``<url>/v1``."""
    app = web.Application()
    app[PLANNER] = Planner()
    app.router.add_post("/v1/chat/completions", chat_completions)
    return app
