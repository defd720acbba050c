"""Log lines: the access line's direct path matches the formatter, and a loop turn's lines
leave in one write."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import orjson
import pytest

from idemproxy import logs


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingStream]:
    """configure_logging() on a captured stderr; the root logger is restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    captured = CountingStream()
    monkeypatch.setattr(sys, "stderr", captured)
    monkeypatch.setattr(logs, "_json_handler", None)
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))
    logs.configure_logging("info")
    yield captured
    logging.getLogger().handlers[:] = handlers
    root.setLevel(level)


def lines(stream: CountingStream) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


FIELDS: dict[str, object] = {"upstream": "up", "status": 200, "effect_key": None, "ms": 1.5}


def test_the_direct_line_is_the_formatters_line(stream: CountingStream) -> None:
    logger = logging.getLogger("idemproxy.access")
    logger.info("POST up -> 200 forwarded", extra=FIELDS)
    logs.info_fields(logger, "POST up -> 200 forwarded", FIELDS)
    through_logging, direct = lines(stream)
    through_logging.pop("ts")
    assert isinstance(direct.pop("ts"), str)
    assert list(direct.items()) == list(through_logging.items())


def test_without_the_json_handler_the_line_goes_through_logging(
    stream: CountingStream, caplog: pytest.LogCaptureFixture
) -> None:
    logging.getLogger().addHandler(caplog.handler)  # a second handler: no direct path
    logs.info_fields(logging.getLogger("idemproxy.access"), "GET up -> 200 forwarded", FIELDS)
    assert [record.getMessage() for record in caplog.records] == ["GET up -> 200 forwarded"]
    assert caplog.records[0].__dict__["status"] == 200


async def test_lines_of_one_loop_turn_leave_in_one_write_in_order(
    stream: CountingStream,
) -> None:
    access, other = logging.getLogger("idemproxy.access"), logging.getLogger("idemproxy.x")
    logs.info_fields(access, "first", {})
    other.warning("second")
    logs.info_fields(access, "third", {})
    assert stream.writes == 0
    logging.getLogger().handlers[0].flush()  # what the loop's callback does at the turn's end
    assert stream.writes == 1
    assert [line["msg"] for line in lines(stream)] == ["first", "second", "third"]


def test_outside_a_loop_a_line_is_written_at_once(stream: CountingStream) -> None:
    logging.getLogger("idemproxy.x").info("start-up")
    assert stream.writes == 1
    assert lines(stream)[0]["msg"] == "start-up"
