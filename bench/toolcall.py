"""MCP tools/call cells: idemproxy's MCP mode beside the reference proxy, on the same bytes.

Both proxies get the requests of ``mcp.lua``: a ``tools/call`` POST as the official SDK's
stateless client sends it, to the same upstream (nginx answering ``/mcp`` with a fixed JSON-RPC
result). What the rows compare: the reference has no MCP mode and treats the call as a plain
POST keyed by its ``Idempotency-Key`` header (one ``SET NX``, forward, one ``SET`` of the
answer; a replay sends the stored bytes back as they are, with the recorded JSON-RPC id, which
a real client would not match to its request). idemproxy parses the JSON-RPC message, tells a
tool call from protocol traffic, keys it on ``params._meta`` (batch and tool call) with the
tool's name and canonical arguments, records it as an effect, and on replay answers with the
recorded result under the new request's id. So a ratio is the price of doing MCP right over
the cheapest keyed POST, with the same Redis, upstream and event loop.

The request ``record_once`` and ``check`` send here is the one ``mcp.lua`` builds: keep the two
alike (a replay cell replays what ``record_once`` recorded).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from report import Case

SCRIPT = "mcp.lua"
SERVER_PATH = "/mcp"  # the MCP server's path on the upstream (bench/nginx.conf)
UPSTREAM = "tools"  # idemproxy's upstream for the MCP server, on the shipped ``mcp`` pack
REFERENCE_URL_PATH = "/up" + SERVER_PATH  # the reference forwards /up/<path> to <path>
IDEMPROXY_URL_PATH = f"/{UPSTREAM}{SERVER_PATH}"
FIRST_ID = 2  # the id of mcp.lua's first calls, which the upstream's fixed answer carries

CASES = (
    Case("e", "MCP tools/call, first call", SCRIPT, "first", "redis"),
    Case("e", "MCP tools/call, replay", SCRIPT, "replay", "redis"),
)


def upstream_config(upstream_url: str) -> str:
    """The line of idemproxy's ``upstreams:`` for the MCP server."""
    return f"  {UPSTREAM}: {{url: '{upstream_url}', policy: mcp, max_connections: 1100}}\n"


def record_once(url: str, run: str) -> None:
    """Make the record a replay cell replays, so that no cell starts with a race to claim it."""
    _call(url, run, "replay-" + run, FIRST_ID)


def check(url: str, run: str) -> None:
    """Refuse to measure an idemproxy whose MCP answers are not what the rows claim: a first
    call relayed as the upstream sent it, a repeat replayed under its own id."""
    call = "check-" + run
    first, first_headers = _call(url, run, call, FIRST_ID)
    repeat, repeat_headers = _call(url, run, call, 7)
    problems = []
    if first.get("id") != FIRST_ID or "result" not in first:
        problems.append(f"first call answered {first}")
    if first_headers.get("Idempotent-Replayed"):
        problems.append("first call answered as a replay")
    if repeat != {**first, "id": 7}:
        problems.append(f"repeat with id 7 answered {repeat}, not the first answer with id 7")
    if repeat_headers.get("Idempotent-Replayed") != "true":
        problems.append("repeat answered without Idempotent-Replayed: true")
    if problems:
        raise SystemExit(f"bench: idemproxy's MCP mode at {url}: " + "; ".join(problems))


def _call(url: str, run: str, call: str, request_id: int) -> tuple[dict[str, Any], Any]:
    meta = {
        "dev.idemproxy/batch": "b-" + run,
        "dev.idemproxy/toolCall": call,
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"_meta": meta, "name": "send_message", "arguments": {"content": "hello world"}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "send_message",
        "Idempotency-Key": call,
    }
    body = json.dumps(message, separators=(",", ":")).encode()
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            document: dict[str, Any] = json.loads(answer.read())
            return document, answer.headers
    except urllib.error.HTTPError as refused:
        # A refusal's JSON-RPC error says why (an upstream without the mcp pack, say).
        detail = refused.read().decode(errors="replace")
        raise SystemExit(f"bench: tools/call to {url}: HTTP {refused.code} {detail}") from None
