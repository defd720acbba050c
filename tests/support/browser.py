"""The real browser the browser tests drive: Debian's Chromium through Playwright."""

from __future__ import annotations

import importlib.util
import shutil

import pytest


def chromium() -> str:
    """Debian's chromium; missing, the test fails saying how to install it (it never skips)."""
    path = shutil.which("chromium")
    if path is None or importlib.util.find_spec("playwright") is None:
        pytest.fail("chromium or playwright is missing: run scripts/install-browser.sh")
    return path
