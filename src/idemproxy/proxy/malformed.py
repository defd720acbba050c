"""Malformed HTTP from a client: aiohttp refuses it with 400; we log one line, not its bytes.

aiohttp logs such a request as an error with a traceback, and the exception's message quotes
the offending bytes: a header line too long to parse may be an ``Authorization`` header, so the
credential would reach the log. A client's bad request is not the proxy's error either, and a
flood of them must not look like one.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError


class MalformedRequestFilter(logging.Filter):
    """Rewrites aiohttp's report of an unparseable request into a one-line warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "malformed request refused with %s (%s); its bytes are not logged"
            record.args = (exc.code, type(exc).__name__)
            record.exc_info = record.exc_text = None
        return True


_FILTER = MalformedRequestFilter()


def quiet_malformed_requests() -> None:
    """Install the filter on aiohttp's server logger (once per process, however often called)."""
    logging.getLogger("aiohttp.server").addFilter(_FILTER)
