#!/usr/bin/env bash
# Make sure a Redis answers on 127.0.0.1:6379 for the integration tests.
# Starts redis-server (installing Debian's package if it is missing) when nothing answers.
# It keeps nothing on disk: tests create and delete their own keys.
set -euo pipefail

port=6379
answers() { python3 - "$port" <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as s:
        s.sendall(b"PING\r\n")
        sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
except OSError:
    sys.exit(1)
PY
}

answers && exit 0
if ! command -v redis-server >/dev/null 2>&1; then
    echo "ensure-redis: installing redis-server (Debian package)"
    "$(dirname "$0")/apt-install.sh" redis-server
fi
echo "ensure-redis: starting redis-server on 127.0.0.1:$port"
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir /tmp --logfile /tmp/idemproxy-test-redis.log
for _ in $(seq 50); do
    answers && exit 0
    sleep 0.1
done
echo "ensure-redis: redis-server did not answer on port $port; see /tmp/idemproxy-test-redis.log" >&2
exit 1
