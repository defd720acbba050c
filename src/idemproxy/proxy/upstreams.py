"""Which configured upstream a request is for, and the exact URL it goes to."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from aiohttp import ClientTimeout
from yarl import URL

from idemproxy.config.settings import UpstreamConfig
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.policies.adapters import adapter_for
from idemproxy.policies.adapters.base import Adapter
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.policy import Policy


@dataclass(frozen=True, slots=True)
class Upstream:
    name: str
    base_url: str
    policy: Policy
    matcher: RouteMatcher
    timeout: ClientTimeout
    adapter: Adapter

    @classmethod
    def configure(cls, name: str, config: UpstreamConfig, policy: Policy) -> Upstream:
        # No total timeout: a long LLM stream is healthy as long as bytes keep coming.
        timeout = ClientTimeout(
            total=None, sock_connect=config.connect_timeout_s, sock_read=config.read_timeout_s
        )
        return cls(name, config.url, policy, RouteMatcher(policy), timeout, adapter_for(policy))


@dataclass(frozen=True, slots=True)
class Target:
    upstream: Upstream
    path: str  # decoded path below the upstream, for route matching and fingerprints
    query_string: str
    url: URL  # what is sent, with the client's percent-encoding preserved


def resolve_target(raw_target: str, upstreams: dict[str, Upstream]) -> Target:
    """``/<upstream>/<path>?<query>`` -> the configured upstream's base URL + path + query.

    The upstream's host comes only from configuration, never from the request: absolute-form
    targets and dot segments are refused so the proxy cannot be steered anywhere else.
    """
    if not raw_target.startswith("/") or raw_target.startswith("//"):
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            "send origin-form requests to http://127.0.0.1:<port>/<upstream>/<path>;"
            " this proxy never follows absolute URLs",
        )
    raw_path, _, query = raw_target.partition("?")
    name, _, raw_tail = raw_path[1:].partition("/")
    upstream = upstreams.get(unquote(name))
    if upstream is None:
        configured = ", ".join(sorted(upstreams)) or "none"
        raise RequestRefused(
            ProblemCode.UNKNOWN_UPSTREAM,
            f"the first path segment must name a configured upstream ({configured}), as in"
            f" /<upstream>/<path>; {unquote(name)!r} is not one",
        )
    path = "/" + unquote(raw_tail)
    if _has_dot_segment(path) or "\\" in path:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            "the path holds '.' or '..' segments (or a backslash); send the normalized path",
        )
    target = upstream.base_url + "/" + raw_tail + ("?" + query if query else "")
    return Target(upstream, path, query, URL(target, encoded=True))


def _has_dot_segment(path: str) -> bool:
    # Every segment follows a "/": without a "/." none can be "." or "..", which rules out
    # nearly every path with one substring test instead of a split.
    return "/." in path and any(segment in (".", "..") for segment in path.split("/"))
