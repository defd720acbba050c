"""The ``idemproxy`` command. Each verb group lives in its own module with a ``register``.

Only the CLI configures logging. A :class:`ConfigError` anywhere ends the command with its
one-paragraph message and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from idemproxy import __version__
from idemproxy.cli import operator, policies, serve
from idemproxy.errors import ConfigError

EXIT_CONFIG = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="idemproxy", description="Exactly-once sidecar proxy for agents' external effects."
    )
    parser.add_argument("--version", action="version", version=f"idemproxy {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    serve.register(verbs)
    policies.register(verbs)
    operator.register(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ConfigError as exc:
        print(f"idemproxy: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
