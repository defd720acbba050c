#!/usr/bin/env bash
# Install Debian packages quietly, as root or through sudo: what every ensure-/install- script
# of this directory does when a tool it needs is missing.
#
# Usage: scripts/apt-install.sh PACKAGE...   (progress on stderr; exits non-zero on failure)
set -euo pipefail

sudo=()
[[ "$(id -u)" -ne 0 ]] && sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -qq -y --no-install-recommends "$@" >/dev/null
