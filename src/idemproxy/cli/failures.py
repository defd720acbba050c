"""What the ``idemproxy`` command exits with, the same for every verb, and how it reports a
failure: one line on stderr, or with ``--json`` an error document on stdout::

    0    done, and the answer is fine
    1    done, and the answer is not fine: the proxy or the store refused (not found, a state
         that moved on, a rate limit), or `status` / `store status` show something waiting for
         an operator (unknown outcomes, a paused agent, a parked delivery, a store not ready)
    2    usage or configuration error: a flag, URL or config file wrong on its face; nothing
         was contacted. Fix the command line or the config
    3    the admin API or the store cannot be reached or used: nothing answers, the server is
         not the admin API, the token is missing or wrong, the store is not there or is down.
         Fix the surroundings: start the proxy, set the token, mount the store
    130  interrupted

Three failures, since a script must tell them apart: "look at the effects" (1) is work for
whoever watches the agent, "fix the call" (2) for whoever wrote the command, "the proxy or its
store is not there for us" (3) for whoever runs the proxy.
"""

from __future__ import annotations

import argparse
import sys
from enum import IntEnum, StrEnum
from typing import Any

import orjson

from idemproxy.admin.client import AdminUnauthorized, AdminUnreachable, NotAdminAPI
from idemproxy.errors import ConfigError, ProblemCode, RequestRefused
from idemproxy.store.errors import InvalidStoreURL, StoreError, StoreNotFound

EXIT_CODES_HELP = (
    "exit codes: 0 done and fine; 1 done and not fine (a refusal, or status showing something"
    " waiting for an operator); 2 usage or configuration error; 3 the admin API or the store"
    " cannot be reached or used"
)


class ExitCode(IntEnum):
    OK = 0
    NOT_FINE = 1
    USAGE = 2
    UNREACHABLE = 3
    INTERRUPTED = 130
    PIPE_CLOSED = 141  # what a shell reports for a command SIGPIPE stopped


class ErrorKind(StrEnum):
    """The ``error`` of a JSON error document, besides the problem codes of refusals."""

    USAGE = "usage"
    INVALID_CONFIG = "invalid-config"
    STORE_NOT_FOUND = "store-not-found"
    STORE_UNAVAILABLE = "store-unavailable"
    ADMIN_UNREACHABLE = "admin-unreachable"
    NOT_ADMIN_API = "not-admin-api"
    UNAUTHORIZED = "unauthorized"


class UsageError(Exception):
    """A command line argparse cannot parse; raised instead of argparse's own exit."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors the command reports like any other failure."""

    def error(self, message: str) -> Any:
        raise UsageError(self, message)


class CommandFailed(Exception):
    """A command that did not do what was asked: its exit code, kind and message."""

    def __init__(
        self, exit_code: ExitCode, error: str, detail: str, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail)
        self.exit_code = exit_code
        self.error = error
        self.detail = detail
        self.extra = extra or {}


# Refusals that say the proxy or its store is not there for the caller, not "no" to the ask.
_UNREACHABLE_CODES = {
    ProblemCode.UNAUTHORIZED: ErrorKind.UNAUTHORIZED,
    ProblemCode.STORE_UNAVAILABLE: ErrorKind.STORE_UNAVAILABLE,
}
_UNAVAILABLE = (
    (AdminUnreachable, ErrorKind.ADMIN_UNREACHABLE),
    (NotAdminAPI, ErrorKind.NOT_ADMIN_API),
    (AdminUnauthorized, ErrorKind.UNAUTHORIZED),
    (StoreNotFound, ErrorKind.STORE_NOT_FOUND),
)


def failure(exc: Exception) -> CommandFailed | None:
    """What ``exc`` means for the command; None for an error nobody foresaw (a bug)."""
    if isinstance(exc, CommandFailed):
        return exc
    if isinstance(exc, UsageError):
        detail = f"{exc.message}; see `{exc.parser.prog} --help`"
        return CommandFailed(ExitCode.USAGE, ErrorKind.USAGE, detail)
    if isinstance(exc, ConfigError | InvalidStoreURL):
        return CommandFailed(ExitCode.USAGE, ErrorKind.INVALID_CONFIG, str(exc))
    for kind, error in _UNAVAILABLE:
        if isinstance(exc, kind):
            return CommandFailed(ExitCode.UNREACHABLE, error, str(exc))
    if isinstance(exc, StoreError):
        detail = f"the store is unavailable: {exc}"
        return CommandFailed(ExitCode.UNREACHABLE, ErrorKind.STORE_UNAVAILABLE, detail)
    if isinstance(exc, RequestRefused):
        extra = dict(exc.extra)
        if exc.retry_after_s is not None:
            extra["retry_after_s"] = exc.retry_after_s
        unreachable = _UNREACHABLE_CODES.get(exc.code)
        if unreachable is not None:
            return CommandFailed(ExitCode.UNREACHABLE, unreachable, exc.detail, extra)
        return CommandFailed(ExitCode.NOT_FINE, exc.code.value, exc.detail, extra)
    return None


def report(failed: CommandFailed, as_json: bool, original: Exception) -> None:
    """Say what failed: the JSON error document on stdout, or a few lines on stderr."""
    if as_json:
        document: dict[str, Any] = {
            "error": failed.error,
            "detail": failed.detail,
            "exit_code": int(failed.exit_code),
        }
        document.update((k, v) for k, v in failed.extra.items() if k not in document)
        print(orjson.dumps(document, option=orjson.OPT_INDENT_2, default=str).decode())
        return
    if isinstance(original, UsageError):
        original.parser.print_usage(sys.stderr)
        print(f"{original.parser.prog}: error: {original.message}", file=sys.stderr)
        return
    print(f"idemproxy: {failed.detail}", file=sys.stderr)
    if "state" in failed.extra:
        print(f"current state: {failed.extra['state']}", file=sys.stderr)
