"""The ``idemproxy`` command. Each verb group lives in its own module with a ``register``.

Only the CLI configures logging. Whatever a verb cannot do (a bad flag, a config error, a proxy
that does not answer, a refusal) ends the command with the exit code :mod:`.failures` gives it
and its message, or with ``--json`` a JSON error document, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import cast

from idemproxy import __version__
from idemproxy.cli import operator, policies, serve
from idemproxy.cli.failures import EXIT_CODES_HELP, ExitCode, Parser, failure, report


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="idemproxy",
        description="Exactly-once sidecar proxy for agents' external effects.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"idemproxy {__version__}")
    # Every verb's parser is a Parser (argparse makes them of the parent's class); the verb
    # modules need only what an ArgumentParser has.
    verbs = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="verb", required=True, metavar="VERB"),
    )
    serve.register(verbs)
    policies.register(verbs)
    operator.register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in arguments  # before parsing, for an error in the command line itself
    try:
        args = build_parser().parse_args(arguments)
        as_json = bool(getattr(args, "json", False))
        code: int = args.run(args)
        sys.stdout.flush()  # here, where a closed pipe can still be told apart
    except KeyboardInterrupt:
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more to say, and no traceback about it.
        # What is still buffered goes nowhere instead of failing again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.PIPE_CLOSED)
    except Exception as exc:
        failed = failure(exc)
        if failed is None:
            raise
        report(failed, as_json, exc)
        return int(failed.exit_code)
    return code


if __name__ == "__main__":
    sys.exit(main())
