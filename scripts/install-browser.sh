#!/usr/bin/env bash
# Install what the browser tests drive: a real browser visiting a hostile page that tries to use
# the admin API (tests/e2e/test_browser_forgery.py), and an operator using the console
# (tests/e2e/test_console_browser.py).
#   chromium    Debian's package; the test runs it through its executable path
#   playwright  the Python package that drives it (its own browser download is never used)
#
# Usage: scripts/install-browser.sh [VENV]   (default: .venv)
# Idempotent and quiet when everything is already there.
set -euo pipefail

venv="${1:-.venv}"
python="$venv/bin/python"
if [[ ! -x "$python" ]]; then
    echo "install-browser: no virtualenv at $venv (expected $python)" >&2
    exit 1
fi

if ! "$python" -c 'import playwright.sync_api' 2>/dev/null; then
    echo "install-browser: installing playwright into $venv"
    "$python" -m pip install --quiet --disable-pip-version-check "playwright>=1.40"
fi

if ! command -v chromium >/dev/null 2>&1; then
    echo "install-browser: installing chromium (Debian package)"
    "$(dirname "$0")/apt-install.sh" chromium
fi
