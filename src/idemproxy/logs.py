"""Log set-up: one JSON object per line (text on a terminal), extras as fields.

Only the CLI configures logging; library modules just log.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _timestamp(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record)} {record.levelname:<7} {record.getMessage()}"
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        line = f"{line}  {extras}" if extras else line
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class LoopBatchedHandler(logging.StreamHandler[TextIO]):
    """A stream handler whose lines leave once per turn of the running event loop.

    Each write to the log is a system call (its cost: docs/performance.md, "Logging"); the
    proxy logs a line per request and answers several requests per turn of its loop, so their
    lines leave together in one write, at the end of the turn they were logged in. Outside a
    running loop (start-up, other threads) a line is written at once, after any still pending.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write_line(self.format(record) + self.terminator)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - as StreamHandler.emit: report, never raise
            self.handleError(record)

    def write_line(self, line: str) -> None:
        """Write a formatted line (its terminator included), or queue it for this turn."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.acquire()
        try:
            if loop is not None and not self._pending:
                loop.call_soon(self.flush)
            self._pending.append(line)
            if loop is None:
                self.flush()
        finally:
            self.release()

    def flush(self) -> None:
        self.acquire()
        try:
            if self._pending:
                lines = "".join(self._pending)
                self._pending.clear()
                self.stream.write(lines)
            super().flush()
        except (OSError, ValueError):
            # The log itself is failing (a closed stream, a full disk): nowhere left to report
            # it, and the requests these lines describe must not fail for it.
            pass
        finally:
            self.release()


# The JSON handler configure_logging installed, while it is the one in use: lines logged
# through info_fields() skip the LogRecord and go to its stream directly.
_json_handler: LoopBatchedHandler | None = None


def info_fields(logger: logging.Logger, msg: str, fields: dict[str, Any]) -> None:
    """``logger.info(msg, extra=fields)``, the same line at a fraction of the cost.

    A line on every request is worth it: the logging machinery (a LogRecord, its extras copied
    into and filtered back out of its ``__dict__``, two lookups of handlers) has a cost per line
    worth saving (docs/performance.md, "Logging"). When the JSON handler of
    :func:`configure_logging` is the root's only handler, the line is built here exactly as
    :class:`JsonFormatter` would build it and handed to it; in any other set-up (a terminal,
    tests, embedding) it goes through ``logger``.
    """
    handler = _json_handler
    if (
        handler is None
        or not logger.isEnabledFor(logging.INFO)
        or logging.root.handlers != [handler]
        or handler.filters
        or logger.handlers
        or logger.filters
        or not logger.propagate
    ):
        logger.info(msg, extra=fields)
        return
    entry: dict[str, Any] = {
        "ts": _timestamp(time.time()),
        "level": "info",
        "logger": logger.name,
        "msg": msg,
        **fields,
    }
    handler.write_line(orjson.dumps(entry, default=str).decode() + handler.terminator)


def configure_logging(level: str) -> None:
    # Neither format shows the caller, thread or process, so records skip collecting them: the
    # optimisations the logging HOWTO names, worth a quarter of each access line's cost.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    global _json_handler
    handler = LoopBatchedHandler(sys.stderr)
    json_lines = not sys.stderr.isatty()
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    _json_handler = handler if json_lines else None
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
