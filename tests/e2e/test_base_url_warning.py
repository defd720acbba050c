"""`check-config` and `serve` warn about an upstream URL that hides its pack's routes, naming
the URL, the pack and the URL to use instead; run as a user runs them, from the console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

# The chart README's example before it was fixed: both URLs are the APIs' SDK base URLs.
SDK_BASE_URLS = (
    "upstreams:\n"
    "  discord: {url: 'https://discord.com/api/v10', policy: discord}\n"
    "  openai: {url: 'https://api.openai.com/v1'}\n"
)
DISCORD_WARNING = (
    "upstream 'discord': its URL https://discord.com/api/v10 ends in /v10, where the discord"
    " pack's routes begin (/{version}/...)"
)


def idemproxy(*args: str) -> subprocess.CompletedProcess[str]:
    script = shutil.which("idemproxy", path=str(Path(sys.executable).parent))
    assert script is not None, "install the package first: pip install -e '.[dev]'"
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=60, check=False)


def test_check_config_warns_about_each_misplaced_url_and_names_the_fix(tmp_path: Path) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text(SDK_BASE_URLS)

    result = idemproxy("check-config", str(config))

    assert result.returncode == 0, result.stderr
    assert DISCORD_WARNING in result.stderr
    assert "Use https://discord.com/api as the upstream's URL" in result.stderr
    assert "upstream 'openai': its URL https://api.openai.com/v1" in result.stderr
    assert "Use https://api.openai.com as the upstream's URL" in result.stderr
    assert result.stdout.rstrip().endswith(f"{config}: OK, with 2 warnings")


def test_check_config_is_quiet_about_urls_written_for_the_packs(tmp_path: Path) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text(
        "upstreams:\n"
        "  discord: {url: 'https://discord.com/api', policy: discord}\n"
        "  openai: {url: 'https://api.openai.com'}\n"
    )

    result = idemproxy("check-config", str(config))

    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    assert result.stdout.rstrip().endswith(f"{config}: OK")


def test_serve_logs_the_warning_at_start_up(tmp_path: Path) -> None:
    proxy = ServedProxy(
        tmp_path,
        "--upstream", "discord=http://127.0.0.1:9/api/v10",
        "--policy", "discord=discord",
        "--store", f"sqlite:///{tmp_path}/store.db",
    )  # fmt: skip
    with running(proxy):
        deadline = time.monotonic() + 10
        while "idemproxy listening" not in proxy.output() and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [orjson.loads(line) for line in proxy.output().splitlines() if line[:1] == "{"]

    warnings = [line for line in lines if line["level"] == "warning" and "URL" in line["msg"]]
    assert len(warnings) == 1, lines
    warning = warnings[0]
    assert warning["msg"].startswith(
        "upstream 'discord': its URL http://127.0.0.1:9/api/v10 ends in /v10, where the discord"
        " pack's routes begin (/{version}/...)"
    )
    assert "Use http://127.0.0.1:9/api as the upstream's URL" in warning["msg"]
    assert warning["upstream"] == "discord"
    assert warning["suggested_url"] == "http://127.0.0.1:9/api"
