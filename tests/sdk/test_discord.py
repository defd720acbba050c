"""discord.py through the proxy: one message per tool call, whatever happens.

discord.py's HTTP base URL is the class attribute ``discord.http.Route.BASE``; its requests get
the tool-call headers from an aiohttp trace hook, the one per-request hook the client offers.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import aiohttp
import discord
import orjson
import pytest

from tests.sdk.conftest import Fakes, tool_call
from tests.support.fakes.service import Fault, Planned, Seen, form_parts
from tests.support.processes import ServedProxy

_channels = itertools.count(1)


@pytest.fixture
def channel_id() -> int:
    return 1300000000000000000 + next(_channels)


@pytest.fixture
def via(proxy: ServedProxy) -> Iterator[Callable[[str], None]]:
    """Point discord.py at an upstream of the proxy (a class attribute: restored after)."""
    original = discord.http.Route.BASE

    def point(upstream: str) -> None:
        discord.http.Route.BASE = f"{proxy.url}/{upstream}/v10"

    point("discord")
    yield point
    discord.http.Route.BASE = original


@asynccontextmanager
async def bot(headers: dict[str, str]) -> AsyncIterator[discord.Client]:
    """A freshly started bot, as after a crash: logged in over HTTP, no gateway."""

    async def add_headers(
        session: aiohttp.ClientSession, context: SimpleNamespace, params: Any
    ) -> None:
        params.headers.update(headers)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(add_headers)
    client = discord.Client(intents=discord.Intents.none(), http_trace=trace)
    try:
        await client.login("test-token")
        yield client
    finally:
        await client.close()


async def send(channel_id: int, text: str, headers: dict[str, str]) -> discord.Message:
    async with bot(headers) as client:
        return await client.get_partial_messageable(channel_id).send(text)


async def send_with_file(channel_id: int, text: str, headers: dict[str, str]) -> discord.Message:
    """A send with an attachment: discord.py makes it a multipart body with a random boundary
    and a random nonce inside its ``payload_json`` part."""
    async with bot(headers) as client:
        report = discord.File(io.BytesIO(b"figures for " + text.encode()), filename="report.txt")
        return await client.get_partial_messageable(channel_id).send(text, file=report)


Sender = Callable[[int, str, dict[str, str]], Awaitable[discord.Message]]


def sent_message(seen: Seen) -> dict[str, Any]:
    """The message JSON of a create as Discord got it: the body, or its payload_json part."""
    body = seen.body
    if seen.headers["Content-Type"].startswith("multipart/form-data"):
        body = form_parts(seen.headers["Content-Type"], body)["payload_json"][1]
    message: dict[str, Any] = orjson.loads(body)
    return message


def messages(fakes: Fakes, channel_id: int) -> list[dict[str, Any]]:
    return [m for m in fakes.discord.messages if m["channel_id"] == str(channel_id)]


@pytest.mark.usefixtures("via")
async def test_a_rerun_after_a_crash_replays_the_same_message(
    fakes: Fakes, run_id: str, channel_id: int
) -> None:
    first = await send(channel_id, f"report {run_id}", tool_call(run_id))
    again = await send(channel_id, f"report {run_id}", tool_call(run_id))

    assert again.id == first.id
    assert len(messages(fakes, channel_id)) == 1
    # discord.py sends a random decimal nonce; Discord saw the one derived from the tool call.
    created = messages(fakes, channel_id)[0]
    assert first.nonce == created["nonce"]
    assert not created["nonce"].isdigit()
    assert len(created["nonce"]) <= 25


@pytest.mark.usefixtures("via")
async def test_an_sdk_retry_after_a_rate_limit_makes_one_message(
    fakes: Fakes, run_id: str, channel_id: int
) -> None:
    limited = {"message": "You are being rate limited.", "retry_after": 0.05, "global": False}
    fakes.discord.plan("message", Planned(Fault.FAIL_BEFORE, 429, limited, {"Via": "1.1 google"}))

    message = await send(channel_id, f"hello {run_id}", tool_call(run_id))

    assert message.content == f"hello {run_id}"
    assert len(messages(fakes, channel_id)) == 1


@pytest.mark.usefixtures("via")
async def test_an_sdk_retry_after_a_500_that_had_posted_makes_one_message(
    fakes: Fakes, run_id: str, channel_id: int
) -> None:
    fakes.discord.plan("message", Planned(Fault.FAIL_AFTER, 500, {"message": "500: oops"}))

    message = await send(channel_id, f"posted {run_id}", tool_call(run_id))

    # discord.py retried the 500; the proxy re-sent under the same nonce inside Discord's
    # window, and Discord answered with the message the first attempt had made.
    created = messages(fakes, channel_id)
    assert len(created) == 1
    assert message.id == int(created[0]["id"])
    sent = fakes.discord.seen_on(f"/channels/{channel_id}/")
    assert len(sent) == 2
    assert len({orjson.loads(s.body)["nonce"] for s in sent}) == 1


@pytest.mark.usefixtures("via")
@pytest.mark.parametrize("sender", [send, send_with_file], ids=["json", "with_file"])
async def test_an_sdk_retry_after_a_lost_connection_makes_one_message(
    fakes: Fakes, run_id: str, channel_id: int, sender: Sender
) -> None:
    fakes.discord.plan("message", Planned(Fault.DROP_AFTER))

    message = await sender(channel_id, f"dropped {run_id}", tool_call(run_id))

    # The proxy answered 502 (outcome unknown); discord.py retries a 502 by itself, and the
    # proxy settled it by re-sending under the same nonce, which Discord deduplicated.
    created = messages(fakes, channel_id)
    assert len(created) == 1
    assert message.id == int(created[0]["id"])
    payloads = [sent_message(seen) for seen in fakes.discord.seen_on(f"/channels/{channel_id}/")]
    assert len(payloads) == 2
    # Both attempts carried the nonce derived from the tool call, enforced, not discord.py's
    # random one (in the payload_json part of a send with a file): a fresh send after a crash
    # carries it too.
    assert {p["nonce"] for p in payloads} == {created[0]["nonce"]}
    assert not str(created[0]["nonce"]).isdigit()
    assert all(p["enforce_nonce"] is True for p in payloads)


async def test_after_the_nonce_window_an_unknown_outcome_waits_for_review(
    fakes: Fakes, run_id: str, channel_id: int, via: Callable[[str], None]
) -> None:
    via("discord-brief")  # the same Discord, under a policy whose window is one second
    fakes.discord.plan("message", Planned(Fault.DROP_AFTER))
    with pytest.raises(discord.HTTPException) as first:
        await send(channel_id, f"late {run_id}", tool_call(run_id))
    # discord.py retried the 502 a second later: past the window, so the proxy would not re-send.
    assert first.value.status == 409

    with pytest.raises(discord.HTTPException) as rerun:
        await send(channel_id, f"late {run_id}", tool_call(run_id))

    assert rerun.value.status == 409
    assert "outcome-unknown" in rerun.value.text
    assert "review" in rerun.value.text
    assert len(messages(fakes, channel_id)) == 1
    assert len(fakes.discord.seen_on(f"/channels/{channel_id}/")) == 1


@pytest.mark.usefixtures("via")
async def test_a_rerun_of_a_send_with_a_file_replays_the_same_message(
    fakes: Fakes, run_id: str, channel_id: int
) -> None:
    first = await send_with_file(channel_id, f"attached {run_id}", tool_call(run_id))
    again = await send_with_file(channel_id, f"attached {run_id}", tool_call(run_id))

    assert again.id == first.id
    created = messages(fakes, channel_id)
    assert len(created) == 1
    assert created[0]["attachments"][0]["filename"] == "report.txt"
    # The nonce Discord saw inside payload_json is the proxy's, derived from the tool call.
    assert not str(created[0]["nonce"]).isdigit()


@pytest.mark.usefixtures("via")
async def test_a_rerun_worded_anew_posts_nothing_and_says_what_was_posted(
    fakes: Fakes, run_id: str, channel_id: int
) -> None:
    first = await send(channel_id, f"The report for {run_id} is ready.", tool_call(run_id))
    with pytest.raises(discord.HTTPException) as rerun:
        await send(channel_id, f"Report {run_id} is done.", tool_call(run_id))

    assert rerun.value.status == 409
    problem = orjson.loads(rerun.value.text)
    assert problem["type"].endswith("/tool-call-already-acted")
    assert problem["external_id"] == str(first.id)
    assert problem["recorded_answer"]["content"] == first.content
    assert len(messages(fakes, channel_id)) == 1
