"""The tally of blocked duplicates by agent and batch that ``idemproxy duplicates`` shows."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from idemproxy import duplicates
from idemproxy.duplicates import BlockedDuplicates
from idemproxy.metrics import DuplicateKind


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        self.now_ms += 1
        return self.now_ms


def test_repeats_are_summed_per_agent_and_batch_with_their_top_routes() -> None:
    tally = BlockedDuplicates(clock_ms=Clock())
    for _ in range(5):
        tally.count("bot", "b1", "discord", "create_message", "replayed")
    tally.count("bot", "b1", "discord", "create_reaction", "in_progress")
    tally.count("bot", "b2", "slack", "post_message", "unknown")
    tally.count("helper", "h1", "slack", "post_message", "replayed")

    summary = tally.summary()

    assert summary["blocked"] == 8
    bot, helper = summary["agents"]
    assert (bot["agent"], bot["blocked"]) == ("bot", 7)
    assert bot["kinds"] == {"replayed": 5, "in_progress": 1, "unknown": 1}
    assert bot["top_routes"][0] == {"upstream": "discord", "route": "create_message", "blocked": 5}
    first, second = bot["batches"]
    assert (first["batch"], first["blocked"]) == ("b1", 6)
    assert [r["route"] for r in first["top_routes"]] == ["create_message", "create_reaction"]
    assert (second["batch"], second["kinds"]) == ("b2", {"unknown": 1})
    assert (helper["agent"], helper["blocked"]) == ("helper", 1)


def test_one_agent_and_its_top_batches_can_be_asked_for() -> None:
    tally = BlockedDuplicates(clock_ms=Clock())
    for batch, repeats in (("quiet", 1), ("loud", 4), ("middle", 2)):
        for _ in range(repeats):
            tally.count("bot", batch, "up", "write", "replayed")
    tally.count("other", "x", "up", "write", "replayed")

    summary = tally.summary(agent="bot", batches=2)

    (bot,) = summary["agents"]
    assert [b["batch"] for b in bot["batches"]] == ["loud", "middle"]
    assert bot["batches_not_shown"] == 1
    assert summary["blocked"] == 7


def test_the_tally_keeps_the_batches_that_repeated_last_and_says_how_many_it_dropped() -> None:
    tally = BlockedDuplicates(limit=2, clock_ms=Clock())
    tally.count("bot", "b1", "up", "write", "replayed")
    tally.count("bot", "b2", "up", "write", "replayed")
    tally.count("bot", "b1", "up", "write", "replayed")  # b1 is now the most recent
    tally.count("bot", "b3", "up", "write", "replayed")

    summary = tally.summary()

    assert sorted(b["batch"] for b in summary["agents"][0]["batches"]) == ["b1", "b3"]
    assert (summary["batches_forgotten"], summary["repeats_forgotten"]) == (1, 1)
    assert summary["batches_kept"] == 2


async def test_workers_publish_their_tallies_and_any_one_answers_for_all(tmp_path: Path) -> None:
    first = BlockedDuplicates(str(tmp_path), worker="1")
    second = BlockedDuplicates(str(tmp_path), worker="2")
    # Kinds as the proxy gives them: members of a StrEnum.
    first.count("bot", "b1", "up", "write", DuplicateKind.REPLAYED)
    second.count("bot", "b1", "up", "write", DuplicateKind.REPLAYED)
    second.count("bot", "b2", "up", "write", DuplicateKind.UNKNOWN)

    assert first.summary()["blocked"] == 1  # nothing published yet: at most a second later
    await asyncio.sleep(duplicates.PUBLISH_INTERVAL_S + 0.2)

    for worker in (first, second):
        summary = worker.summary()
        assert summary["blocked"] == 3
        batches = {b["batch"]: b["blocked"] for b in summary["agents"][0]["batches"]}
        assert batches == {"b1": 2, "b2": 1}
    assert sorted(os.listdir(tmp_path)) == [
        "blocked-duplicates-1.json",
        "blocked-duplicates-2.json",
    ]
