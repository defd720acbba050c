"""Running code the way a controller without the proxy runs it: ``python -I -S`` (no
site-packages, no PYTHONPATH, no user site), with idemproxy-events' source directory alone
added to the standard library's path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.processes import REPO

PACKAGE_DIR = REPO / "packages" / "idemproxy-events"
PACKAGE_SRC = PACKAGE_DIR / "src"
EXAMPLE_CONTROLLER = REPO / "examples" / "recovery_controller.py"


def isolated_command(code: str) -> list[str]:
    """The command line that runs ``code`` with only the standard library and the package."""
    boot = f"import sys; sys.path.insert(0, {str(PACKAGE_SRC)!r})\n"
    return [sys.executable, "-I", "-S", "-c", boot + code]


def example_controller_command(*args: str) -> list[str]:
    """``python examples/recovery_controller.py ARGS`` as a controller host would run it."""
    code = (
        "import runpy\n"
        f"sys.argv = [{str(EXAMPLE_CONTROLLER)!r}, *{list(args)!r}]\n"
        f"runpy.run_path({str(EXAMPLE_CONTROLLER)!r}, run_name='__main__')\n"
    )
    return isolated_command(code)


def run_isolated(code: str, stdin: str = "", cwd: Path = REPO) -> str:
    """Run ``code`` isolated; its standard output. A failure shows its standard error."""
    result = subprocess.run(
        isolated_command(code),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
