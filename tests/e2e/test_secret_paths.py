"""Tokens in URL paths end to end: a Telegram-style bot token, a Discord webhook's and an
interaction's token reach the upstream as sent, and nothing else the proxy keeps or says holds
them: not the store (the SQLite file's bytes, every Redis key and value), the events, the admin
API, the CLI, the proxy's log (at debug level) or what the recovery controller receives. Two
tokens are still two effects, and wherever a path is shown, a token is ``{token}``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest
from aiohttp import web

from tests.chaos.test_secrets import redis_contents, sqlite_contents
from tests.e2e.test_recovery import cli
from tests.support.controller import Controller
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT, BATCH = "notifier", "release-9"
SECRET = "e2e-controller-secret-0123456789"
BOT_A = "7000000001:AAHbotTokenOfTheFirstBot-0123456789xyz"
BOT_B = "7000000002:AAHbotTokenOfTheSecondBot-0123456789xy"
HOOK_A = "hookTokenA-9mQ3vX1pL8rT2wZ6yB4nC7kD0fG5hJ_aSdFgHjKlQwErTyUiOpZxCvBn"
HOOK_B = "hookTokenB-1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX3yZ4aB5cD6eF7gH8iJ9kL0"
INTERACTION = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5OmludGVyYWN0aW9uVG9rZW5TZWNyZXQ"
TOKENS = (BOT_A, BOT_B, HOOK_A, HOOK_B, INTERACTION)


@dataclass
class Received:
    """The paths the upstream was sent, as they came over the wire."""

    paths: list[str] = field(default_factory=list)


RECEIVED = web.AppKey("received", Received)


async def telegram(request: web.Request) -> web.StreamResponse:
    request.app[RECEIVED].paths.append(request.raw_path)
    if request.match_info["method"] == "broken":
        # Not HTTP: aiohttp's error for it names the whole URL, token included.
        assert request.transport is not None
        request.transport.write(b"garbage, not HTTP\r\n\r\n")
        request.transport.close()
        return web.Response()
    return web.json_response(
        {"ok": True, "result": {"message_id": len(request.app[RECEIVED].paths)}}
    )


async def webhook(request: web.Request) -> web.Response:
    request.app[RECEIVED].paths.append(request.raw_path)
    number = len(request.app[RECEIVED].paths)
    message = {"id": str(1300000000000000000 + number), "channel_id": "81", "webhook_id": "55"}
    return web.json_response(message)


async def interaction(request: web.Request) -> web.Response:
    request.app[RECEIVED].paths.append(request.raw_path)
    return web.Response(status=204)


@pytest.fixture
def servers() -> Iterator[BackgroundServers]:
    servers = BackgroundServers()
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()


def upstream_app() -> web.Application:
    app = web.Application()
    app[RECEIVED] = Received()
    app.router.add_post("/api/bot{token}/{method}", telegram)
    app.router.add_post("/api/v10/webhooks/{webhook_id}/{token}", webhook)
    app.router.add_post("/api/v10/interactions/{id}/{token}/callback", interaction)
    return app


def send(client: httpx.Client, url: str, tool_call: str) -> httpx.Response:
    headers = {"Idem-Agent": AGENT, "Idem-Batch": BATCH, "Idem-Tool-Call": tool_call}
    return client.post(url, json={"chat_id": 42, "text": "v9 is out"}, headers=headers)


def drive(proxy: ServedProxy) -> list[httpx.Response]:
    """Every way a token in the path goes through: forwarded, replayed, another token for the
    same tool call, a token the route's one effect already used, and a failure."""
    telegram, discord = f"{proxy.url}/telegram", f"{proxy.url}/discord/v10"
    with httpx.Client(timeout=10) as client:
        return [
            send(client, f"{telegram}/bot{BOT_A}/sendMessage", "announce"),
            send(client, f"{telegram}/bot{BOT_A}/sendMessage", "announce"),
            send(client, f"{telegram}/bot{BOT_B}/sendMessage", "announce"),
            send(client, f"{discord}/webhooks/55/{HOOK_A}?wait=true", "hook"),
            send(client, f"{discord}/webhooks/55/{HOOK_B}?wait=true", "hook"),
            send(client, f"{discord}/interactions/77/{INTERACTION}/callback", "reply"),
            send(client, f"{telegram}/bot{BOT_A}/broken", "broken"),
        ]


def admin_answers(proxy: ServedProxy, keys: list[str]) -> dict[str, bytes]:
    paths = [
        "/v1/status",
        f"/v1/agents/{AGENT}",
        f"/v1/agents/{AGENT}/events?limit=1000",
        f"/v1/agents/{AGENT}/audit",
        f"/v1/agents/{AGENT}/batches/{BATCH}",
        f"/v1/agents/{AGENT}/batches/{BATCH}/compensation",
        "/v1/review",
        "/v1/delivery",
        *(f"/v1/effects/{quote(key, safe='')}" for key in keys),
    ]
    answers = {}
    for path in paths:
        answer = httpx.get(proxy.admin_url + path, timeout=10)
        assert answer.status_code == 200, (path, answer.text)
        answers[path] = answer.content
    return answers


def cli_outputs(proxy: ServedProxy) -> dict[str, bytes]:
    admin = ("--admin-url", proxy.admin_url)
    commands = {
        "batch-status --json": ("batch-status", AGENT, BATCH, *admin, "--json"),
        "batch-status": ("batch-status", AGENT, BATCH, *admin),
        "review list": ("review", "list", *admin),
        "review list --json": ("review", "list", *admin, "--json"),
        "recover --strategy compensate": (
            "recover", AGENT, BATCH, "--strategy", "compensate", *admin,
        ),
    }  # fmt: skip
    outputs = {}
    for name, argv in commands.items():
        code, out = cli(*argv)
        assert code == 0, (name, out)
        outputs[name] = out.encode()
    return outputs


def delivered(controller: Controller, proxy: ServedProxy) -> list[dict[str, Any]]:
    """The events the controller accepted, once it holds every stored one."""
    stored = orjson.loads(
        httpx.get(f"{proxy.admin_url}/v1/agents/{AGENT}/events?limit=1000", timeout=10).content
    )["events"]
    for _ in range(300):
        if controller.event_ids(AGENT) == [event["event_id"] for event in stored]:
            return controller.events(AGENT)
        time.sleep(0.1)
    pytest.fail(f"the controller got {controller.event_ids(AGENT)} of {stored}")


def forms(token: str) -> list[bytes]:
    """A token as it may be written: as sent, and percent-encoded."""
    return [token.encode(), quote(token, safe="").encode()]


def test_tokens_in_paths_reach_the_upstream_and_nothing_else(
    tmp_path: Path, store_url: str, servers: BackgroundServers
) -> None:
    app = upstream_app()
    url = servers.serve(app) + "/api"
    controller = Controller(SECRET)
    servers.run(controller.start())
    env = {
        "IDEMPROXY_CONTROLLER__URL": controller.url,
        "IDEMPROXY_CONTROLLER__SECRET": SECRET,
        "IDEMPROXY_CONTROLLER__POLL_INTERVAL_S": "0.1",
        "IDEMPROXY_CONTROLLER__BACKOFF_S": "0.05",
    }
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"telegram={url}",  # no pack of its own: generic
        "--upstream", f"discord={url}",
        "--store", store_url,
        "--log-level", "debug",
        env=env,
    )  # fmt: skip
    with running(proxy):
        answers = drive(proxy)
        keys = [a.headers["Idem-Key"] for a in answers if "Idem-Key" in a.headers]
        admin = admin_answers(proxy, keys)
        outputs = cli_outputs(proxy)
        events = delivered(controller, proxy)
    servers.run(controller.stop())

    outcomes = [answer.headers["Idem-Outcome"] for answer in answers]
    assert outcomes == [
        "forwarded",
        "replayed",
        "forwarded",  # another bot's token: another effect of the tool call
        "forwarded",
        "tool-call-already-acted",  # another webhook: a second message, refused
        "forwarded",
        "upstream-disconnected",
    ]
    assert app[RECEIVED].paths == [
        f"/api/bot{BOT_A}/sendMessage",
        f"/api/bot{BOT_B}/sendMessage",
        f"/api/v10/webhooks/55/{HOOK_A}?wait=true",
        f"/api/v10/interactions/77/{INTERACTION}/callback",
        f"/api/bot{BOT_A}/broken",
    ]
    refused = orjson.loads(answers[4].content)
    assert "POST /v10/webhooks/55/{token}" in refused["detail"]

    shown = orjson.loads(outputs["batch-status --json"])
    paths = {action["path"] for group in ("completed", "unknown") for action in shown[group]}
    assert paths == {
        "/bot{token}/sendMessage",
        "/v10/webhooks/55/{token}",
        "/v10/interactions/77/{token}/callback",
        "/bot{token}/broken",
    }
    assert {event["path"] for event in events} == paths

    if store_url.startswith("redis"):
        stored = redis_contents(int(store_url.rsplit(":", 1)[1].split("/")[0]))
    else:
        stored = sqlite_contents(Path(store_url.removeprefix("sqlite:///")))
    sinks = {
        "store": stored,
        "log": proxy.output().encode(),
        "controller": orjson.dumps(events),
        "problem answers": b"".join(answer.content for answer in answers[4:]),
        **{f"admin {path}": body for path, body in admin.items()},
        **{f"cli {name}": out for name, out in outputs.items()},
    }
    # Each sink holds what the run did, so the search below could find a token in it ...
    assert b"/bot{token}/sendMessage" in stored
    assert b'"route":"bot_api"' in sinks["log"]
    assert b"Bad status line" in admin["/v1/review"]
    # ... and no token, in any form.
    for name, content in sinks.items():
        for token in TOKENS:
            for form in forms(token):
                assert form not in content, f"{token} found in the {name}"
