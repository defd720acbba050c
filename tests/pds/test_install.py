"""The reference PDS's install: a registry it cannot reach fails it, saying so, never a skip."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.pds import ENSURE_SCRIPT
from tests.support.processes import free_port


def test_an_unreachable_registry_fails_the_install_and_names_it(tmp_path: Path) -> None:
    registry = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    env = {
        **os.environ,
        "PDS_INSTALL_CACHE": str(tmp_path / "pds"),
        "npm_config_registry": registry,
        "npm_config_cache": str(tmp_path / "npm-cache"),  # nothing to install from offline
        "npm_config_fetch_retries": "0",
    }

    done = subprocess.run(
        [str(ENSURE_SCRIPT)], env=env, capture_output=True, text=True, check=False, timeout=120
    )

    assert done.returncode == 1
    assert done.stdout == ""
    assert f"from the npm registry ({registry}); check that it is reachable" in done.stderr
    assert "they do not skip" in done.stderr
    # Nothing half-installed is left to be taken for an install by the next run.
    assert list((tmp_path / "pds").iterdir()) == []
