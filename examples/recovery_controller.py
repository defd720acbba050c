"""A recovery controller for idemproxy on the standard library and ``idemproxy-events``.

::

    pip install packages/idemproxy-events
    export IDEMPROXY_CONTROLLER__SECRET=$(openssl rand -hex 32)   # the proxy's controller.secret
    python examples/recovery_controller.py --listen 127.0.0.1:8000 --db controller.db

with ``controller: {url: http://127.0.0.1:8000/events}`` in the proxy's config (and the same
secret in its environment). Each delivery is verified, and every event stored once, by agent
and event id, in SQLite; the answer is 204 only after the commit, so what the proxy counts as
delivered is on disk, and a delivery sent again changes nothing. What needs an operator (an
outcome in doubt, a failure) is printed. ``GET /events[?agent=A]`` lists what was stored.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType
from urllib.parse import parse_qs, urlsplit

from idemproxy_events import Event, EventType, RejectedDelivery, receive

SECRET_ENV = "IDEMPROXY_CONTROLLER__SECRET"  # noqa: S105 (a variable name, not a secret)
MAX_BODY_BYTES = 16 * 1024 * 1024

SCHEMA = """CREATE TABLE IF NOT EXISTS events (
    agent TEXT NOT NULL, event_id TEXT NOT NULL, type TEXT NOT NULL, effect_key TEXT NOT NULL,
    batch TEXT NOT NULL, tool_call TEXT NOT NULL, action TEXT NOT NULL, upstream TEXT NOT NULL,
    status INTEGER NOT NULL, external_id TEXT NOT NULL, reason TEXT NOT NULL,
    state TEXT NOT NULL, ts_ms INTEGER NOT NULL, PRIMARY KEY (agent, event_id))"""
COLUMNS = ("agent", "event_id", "type", "effect_key", "batch", "tool_call", "action",
           "upstream", "status", "external_id", "reason", "state", "ts_ms")  # fmt: skip
# Spliced from the constant above, never from input (hence the S608 waivers).
INSERT = f"INSERT OR IGNORE INTO events VALUES ({', '.join('?' * len(COLUMNS))})"  # noqa: S608
SELECT = f"SELECT {', '.join(COLUMNS)} FROM events"  # noqa: S608


class EventLog:
    """Every event received, once each."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute(SCHEMA)

    def add(self, events: tuple[Event, ...]) -> list[Event]:
        """Store the events not stored yet, in one transaction; those, in order."""
        added = []
        with self.db:
            for event in events:
                row = tuple(getattr(event, column) for column in COLUMNS)
                if self.db.execute(INSERT, row).rowcount:
                    added.append(event)
        return added

    def listed(self, agent: str | None) -> list[dict[str, object]]:
        """The stored events, of one agent or of all, in the order each agent's happened."""
        if agent is None:
            rows = self.db.execute(SELECT + " ORDER BY agent, event_id")
        else:
            rows = self.db.execute(SELECT + " WHERE agent = ? ORDER BY event_id", (agent,))
        return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def attention(event: Event) -> str:
    """One line about an event, saying what an operator should do if anything."""
    if event.type == EventType.UNKNOWN:
        return (f"needs review: {event.effect_key} ({event.reason}); check {event.upstream},"
                f" then `idemproxy review resolve KEY --as applied|not-applied`")  # fmt: skip
    if event.type == EventType.FAILED:
        return f"failed: {event.effect_key} answered {event.status}"
    return f"{event.type}: {event.effect_key} {event.external_id}".rstrip()


class Handler(BaseHTTPRequestHandler):
    server: ControllerServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if urlsplit(self.path).path != "/events" or length > MAX_BODY_BYTES:
            self._answer(HTTPStatus.NOT_FOUND, {"error": "POST deliveries to /events"})
            return
        body = self.rfile.read(length)
        try:
            delivery = receive(self.server.secret, self.headers, body)
        except RejectedDelivery as rejected:
            self._answer(HTTPStatus(rejected.status), {"error": rejected.reason})
            return
        for event in self.server.log.add(delivery.events):
            print(attention(event), flush=True)
        self._answer(HTTPStatus.NO_CONTENT, None)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != "/events":
            self._answer(HTTPStatus.NOT_FOUND, {"error": "GET /events[?agent=A]"})
            return
        agent = parse_qs(url.query).get("agent", [None])[0]
        self._answer(HTTPStatus.OK, self.server.log.listed(agent))

    def _answer(self, status: HTTPStatus, document: object) -> None:
        body = b"" if document is None else json.dumps(document).encode()
        self.send_response(status)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the events themselves are what this controller prints."""


class ControllerServer(HTTPServer):
    def __init__(self, address: tuple[str, int], secret: str, log: EventLog) -> None:
        super().__init__(address, Handler)
        self.secret = secret
        self.log = log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT")
    parser.add_argument("--db", default="controller.db", help="SQLite file of received events")
    args = parser.parse_args(argv)
    secret = os.environ.get(SECRET_ENV, "")
    if len(secret) < 16:
        print(f"set {SECRET_ENV} to the proxy's controller.secret", file=sys.stderr)
        return 2
    host, _, port = args.listen.rpartition(":")
    server = ControllerServer((host, int(port)), secret, EventLog(args.db))

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    print(f"recovery controller on http://{args.listen}/events", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
