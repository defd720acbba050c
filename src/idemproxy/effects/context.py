"""One request on an effectful route, as the exactly-once flow and its parts see it."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from idemproxy.effectkeys import EffectKey
from idemproxy.effects.envelope import HTTP, Envelope
from idemproxy.policies.route import Route
from idemproxy.policies.secretpaths import shown_path
from idemproxy.proxy.upstreams import Target
from idemproxy.store.records import EffectMeta


@dataclass(frozen=True, slots=True)
class EffectContext:
    """Everything the flow needs about one request, fixed before the claim."""

    request: web.Request
    target: Target
    route: Route
    key: EffectKey
    body: bytes
    fingerprint: str
    answer_headers: tuple[tuple[str, str], ...] = ()  # added to the upstream's answer
    # An operator's compensation: sent while the agent is paused, not counted toward a pause.
    operator: bool = False
    # Known once claimed: when the effect's first attempt was, by the store's clock. Native keys
    # that carry a time (Bluesky record keys) are cut from it.
    first_attempt_ms: int = 0
    # How its answers are framed: as the upstream's (HTTP), or as a JSON-RPC request's (MCP).
    envelope: Envelope = HTTP
    # The MCP tool a tools/call calls: its record's path names it (``/mcp#send_message``).
    tool: str = ""

    def meta(self) -> EffectMeta:
        """The facts its record keeps, and every event, answer and payload made from it shows:
        secret path parameters as ``{name}``, and a tool call's tool after ``#``."""
        return EffectMeta(
            batch=self.key.batch,
            tool_call=self.key.tool_call,
            action=self.key.action,
            upstream=self.target.upstream.name,
            method=self.request.method,
            path=shown_path(self.route, self.target.path) + (f"#{self.tool}" if self.tool else ""),
        )
