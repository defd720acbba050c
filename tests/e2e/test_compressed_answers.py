"""Gzipped answers end to end: httpx asks for gzip by default, and an upstream that obliges
must still give the record its external id and the batch its compensation, while every replay
is the compressed answer the agent first got, byte for byte."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from tests.e2e.test_recovery import cli
from tests.support.fakes.discord import DISCORD, DiscordService, build_discord_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT, BATCH = "news-bot", "digest-3"
SEND = {
    "Idem-Batch": BATCH,
    "Idem-Tool-Call": "announce",
    "Authorization": "Bot e2e-token",
    "Content-Type": "application/json",
}


@pytest.fixture
def gzipping_discord() -> Iterator[tuple[DiscordService, str]]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_discord_app(gzip=True)
        yield app[DISCORD], servers.serve(app) + "/api"
    finally:
        servers.stop()


@dataclass(frozen=True)
class Raw:
    """An answer with its body as it came over the wire, not decompressed."""

    status: int
    headers: httpx.Headers
    body: bytes


def post_raw(client: httpx.Client, url: str, body: bytes) -> Raw:
    with client.stream("POST", url, content=body, headers=SEND) as answer:
        return Raw(answer.status_code, answer.headers, b"".join(answer.iter_raw()))


def test_a_gzipped_answer_keeps_its_id_and_its_compensation_and_replays_byte_for_byte(
    tmp_path: Path, gzipping_discord: tuple[DiscordService, str]
) -> None:
    discord, url = gzipping_discord
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"discord={url}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
    )  # fmt: skip
    messages = f"{proxy.url}/discord/v10/channels/7/messages"
    announce = orjson.dumps({"content": "today's digest is out"})
    admin = ("--admin-url", proxy.admin_url)
    with running(proxy), httpx.Client(timeout=10) as client:
        first = post_raw(client, messages, announce)
        again = post_raw(client, messages, announce)
        code, status = cli("batch-status", AGENT, BATCH, *admin, "--json")
        assert code == 0, status
        code, plan = cli("recover", AGENT, BATCH, "--strategy", "compensate", *admin)
        assert code == 0, plan

    assert client.headers["Accept-Encoding"].startswith("gzip")
    assert (first.status, first.headers["Content-Encoding"]) == (200, "gzip")
    message = discord.messages[0]["id"]
    assert orjson.loads(gzip.decompress(first.body))["id"] == message
    assert (again.status, again.headers["Idem-Outcome"]) == (200, "replayed")
    assert again.headers["Content-Encoding"] == "gzip"
    assert again.body == first.body
    assert len(discord.messages) == 1

    progress = orjson.loads(status)
    assert [a["external_id"] for a in progress["completed"]] == [message]
    assert f"DELETE /v10/channels/7/messages/{message}" in plan
    assert "next: run again with --yes to send 1 compensation(s), newest first" in plan
