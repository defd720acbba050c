"""The ``idemproxy`` console script run as an operator runs it, for tests of what it prints
and the code it exits with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

Ran = subprocess.CompletedProcess[str]
WIDTH = 100  # what an operator's terminal shows without wrapping


def idemproxy(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """Run ``idemproxy ARGS``: the environment without any ``IDEMPROXY_*`` but ``env``."""
    script = shutil.which("idemproxy", path=str(Path(sys.executable).parent))
    assert script is not None, "install the package first: pip install -e '.[dev]'"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
    full_env.update(env or {})
    return subprocess.run(
        [script, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=60
    )


def json_error(ran: Ran) -> dict[str, Any]:
    """The error document a ``--json`` run printed instead of its answer."""
    assert ran.stderr == "", ran.stderr
    document: dict[str, Any] = orjson.loads(ran.stdout)
    assert document["exit_code"] == ran.returncode
    return document


def widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)
