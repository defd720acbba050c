"""How an operator verb runs: its flags, the operator it works on (a running proxy's admin API,
or a store with ``--store``), and how it prints its document and picks its exit code."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeAlias

import orjson

from idemproxy.admin.client import DEFAULT_ADMIN_URL, AdminClient, admin_url
from idemproxy.cli import on_store
from idemproxy.cli.failures import EXIT_CODES_HELP, ExitCode
from idemproxy.errors import ConfigError
from idemproxy.ledger.documents import Document
from idemproxy.ledger.operator import Operator

ADMIN_URL_VARIABLE = "IDEMPROXY_ADMIN_URL"
TOKEN_VARIABLE = "IDEMPROXY_ADMIN_TOKEN"  # noqa: S105 - the name of a variable, not a token

Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Call = Callable[[Operator, argparse.Namespace], Awaitable[Document]]
View = Callable[[Document], str]
ExitRule = Callable[[Document], ExitCode]


def default_actor() -> str:
    """Who the audit log says acted: the login and host running the command."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = f"uid-{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def fine(document: Document) -> ExitCode:
    """The exit rule of a verb whose answer is all it has to say."""
    return ExitCode.OK


def admin_client(args: argparse.Namespace) -> AdminClient:
    """The admin API the flags or the environment name, with the token they give."""
    if args.admin_url is not None:
        text, source = args.admin_url, "--admin-url"
    else:
        text, source = os.environ.get(ADMIN_URL_VARIABLE) or DEFAULT_ADMIN_URL, ADMIN_URL_VARIABLE
    try:
        url = admin_url(text)
    except ValueError as exc:
        raise ConfigError(f"{source} {exc}") from exc
    if args.token is not None:
        return AdminClient(url, args.token, "given with --token")
    return AdminClient(url, os.environ.get(TOKEN_VARIABLE) or None, f"in {TOKEN_VARIABLE}")


@contextlib.asynccontextmanager
async def operator_of(args: argparse.Namespace) -> AsyncIterator[Operator]:
    if args.store:
        if args.token is not None:
            raise ConfigError(
                "--token is for the admin API (--admin-url); --store works on the store"
                " directly and takes no token"
            )
        async with on_store.ledger(args) as ledger:
            yield ledger
        return
    on_store.refuse_config_without_store(args)
    client = admin_client(args)
    try:
        yield client
    finally:
        await client.close()


async def _call(args: argparse.Namespace, call: Call, view: View) -> tuple[Document, str]:
    async with operator_of(args) as operator:
        document = await call(operator, args)
        try:
            # Shown even for --json, to tell a document of the admin API from any other JSON.
            shown = view(document)
        except (KeyError, TypeError) as exc:
            if isinstance(operator, AdminClient):
                raise operator.not_a_document(str(exc)) from exc
            raise
        return document, shown


def _runner(call: Call, view: View, exit_rule: ExitRule) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        document, shown = asyncio.run(_call(args, call, view))
        print(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() if args.json else shown)
        return int(exit_rule(document))

    return run


def verb(
    verbs: Verbs,
    name: str,
    help_text: str,
    call: Call,
    view: View,
    exit_rule: ExitRule = fine,
) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES_HELP)
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--admin-url",
        help=f"a running proxy's admin listener (default ${ADMIN_URL_VARIABLE} or"
        f" {DEFAULT_ADMIN_URL})",
    )
    source.add_argument(
        "--store", help="work on this store instead (one a proxy made): redis://..., sqlite:///..."
    )
    parser.add_argument(
        "--token",
        help=f"the admin API's token (default ${TOKEN_VARIABLE}, which keeps it out of the"
        " process list)",
    )
    on_store.add_config_flag(parser)
    parser.add_argument("--json", action="store_true", help="print the JSON document")
    parser.set_defaults(run=_runner(call, view, exit_rule))
    return parser


def acting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--note", default="", help="why, for the audit log")
    parser.add_argument("--actor", default=default_actor(), help="who, for the audit log")
