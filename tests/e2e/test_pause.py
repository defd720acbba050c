"""Auto-pause end to end: a bot whose token was revoked is paused after five failures, stays
paused across a restart with another threshold, and once resumed its re-run posts each message
exactly once. Real processes: ``idemproxy serve`` on SQLite, the CLI; a Discord fake."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.test_recovery import cli
from tests.support.fakes.discord import DISCORD, DiscordService, build_discord_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

AGENT = "notes-bot"
BOT_TOKEN = "Bot fixed-token"
CALLS = [f"call-{n}" for n in range(6)]


@pytest.fixture
def discord() -> Iterator[tuple[DiscordService, str]]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_discord_app()
        yield app[DISCORD], servers.serve(app) + "/api"
    finally:
        servers.stop()


def post(proxy: ServedProxy, call: str, token: str = "") -> tuple[int, str, dict[str, Any]]:
    """The agent posts the message of one tool call; status, Idem-Outcome and JSON body."""
    headers = {"Idem-Batch": "notes-1", "Idem-Tool-Call": call, "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = token
    body = orjson.dumps({"content": f"note from {call}"})
    request = urllib.request.Request(
        f"{proxy.url}/discord/v10/channels/81/messages", body, headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers["Idem-Outcome"], orjson.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Idem-Outcome"], orjson.loads(error.read())


def paused_gauge(proxy: ServedProxy, expected: float) -> float:
    """idemproxy_agents_paused once the sweep (every 0.2 s here) has counted ``expected``."""
    value = -1.0
    for _ in range(50):
        _, text = http_get(f"{proxy.admin_url}/metrics")
        line = next(li for li in text.decode().splitlines() if li.startswith("idemproxy_agents_p"))
        value = float(line.split()[-1])
        if value == expected:
            break
        time.sleep(0.1)
    return value


def serve(tmp_path: Path, discord_url: str, **env: str) -> ServedProxy:
    return ServedProxy(
        tmp_path,
        "--upstream", f"discord={discord_url}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
        env={"IDEMPROXY_RECOVERY__SWEEP_INTERVAL_S": "0.2", **env},
    )  # fmt: skip


def test_a_revoked_token_pauses_the_agent_and_a_resume_reposts_each_message_once(
    tmp_path: Path, discord: tuple[DiscordService, str]
) -> None:
    service, url = discord
    first = serve(tmp_path, url)
    with running(first):
        assert [post(first, call)[0] for call in CALLS[:5]] == [401] * 5
        status, outcome, problem = post(first, CALLS[5], BOT_TOKEN)
        assert (status, outcome, problem["paused_by"]) == (503, "agent-paused", "auto")
        assert problem["reason"] == (
            "auto-paused after 5 consecutive failures. Last error: upstream answered 401"
        )
        assert len(service.seen_on("/messages")) == 5  # the sixth was never sent
        assert paused_gauge(first, 1) == 1

    # Restarted with a higher threshold: the pause and its snapshot are in the store.
    second = serve(tmp_path, url, IDEMPROXY_RECOVERY__PAUSE_AFTER_FAILURES="10")
    with running(second):
        assert post(second, CALLS[5], BOT_TOKEN)[:2] == (503, "agent-paused")
        assert post(second, CALLS[0], BOT_TOKEN)[:2] == (401, "replayed")  # what is recorded
        code, out = cli("agent", "status", AGENT, "--admin-url", second.admin_url, "--json")
        assert code == 0, out
        status_doc = orjson.loads(out)
        assert (status_doc["state"], status_doc["paused_by"], status_doc["failures"]) == (
            "paused", "auto", 5,
        )  # fmt: skip
        assert [item["result"] for item in status_doc["snapshot"]] == ["freed"] * 5

        code, out = cli("agent", "resume", AGENT, "--admin-url", second.admin_url,
                        "--note", "new bot token deployed")  # fmt: skip
        assert code == 0, out
        assert out.count("freed: sent again on the re-run") == 5
        code, out = cli("agent", "resume", AGENT, "--admin-url", second.admin_url)
        assert code == 1
        assert "is not paused, so there is nothing to resume" in out
        assert paused_gauge(second, 0) == 0

        rerun = [post(second, call, BOT_TOKEN)[:2] for call in CALLS]
        again = [post(second, call, BOT_TOKEN)[:2] for call in CALLS]

        code, out = cli("audit", AGENT, "--admin-url", second.admin_url, "--json")
    assert rerun == [(200, "forwarded")] * 6
    assert again == [(200, "replayed")] * 6
    assert sorted(message["content"] for message in service.messages) == [
        f"note from {call}" for call in CALLS
    ]
    actions = [entry["action"] for entry in orjson.loads(out)["entries"]]
    assert actions == ["agent.auto_pause", *["review.retry"] * 5, "agent.resume"]
