"""Whether an upstream's URL leaves its policy's routes reachable.

A request to ``/<upstream>/<path>`` is matched against the policy's routes by ``<path>`` and
sent to the upstream's URL followed by ``<path>``. Route templates are written from the API's
root as its documentation spells paths (``/v1/chat/completions``, ``/{version}/channels/...``),
so the URL must stop where they begin: ``https://api.openai.com``, ``https://discord.com/api``.
A URL that already holds the routes' first segments (``https://api.openai.com/v1``, the base
URL an SDK shows) still reaches the API, but no request ever matches those routes: each falls
to another route, often the policy's default, and loses what its own route would have done
(a generation replayed, a native dedupe key, a compensation, ``safe`` passing without a key).

This module finds that mistake without knowing any API: the URL's path ends in segments that
the policy's routes begin with. A literal segment must be equal; a placeholder segment only
counts for a URL segment that reads like an API version (``v10``, ``v1beta``), since any
segment would fit it and a correct URL (``https://discord.com/api``) must not be flagged; one
with a literal prefix (``bot{token}``) for a segment that starts with the prefix and reads like
a token, which the warning then shows as the placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from idemproxy.policies.loader import shipped_packs
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.policy import Policy
from idemproxy.policies.route import Route
from idemproxy.policies.templates import is_param, is_rest, param_prefix, segments

# What a placeholder such as Discord's ``{version}`` stands for when a URL ends in it.
_VERSION_SEGMENT = re.compile(r"v\d+(?:[a-z]+\d*)?")
# What a prefixed placeholder such as ``bot{token}`` stands for: a token is long and holds
# digits, where a word that happens to share the prefix (``bottles``) does neither.
_TOKEN_LIKE = re.compile(r"(?=.*\d)\S{16,}")
# Stands in for a placeholder when a route's path is tried against the matcher.
_SAMPLE_VALUE = "sample"


@dataclass(frozen=True, slots=True)
class MisplacedBaseUrl:
    """An upstream URL that ends inside its policy's route paths, and what to use instead."""

    upstream: str
    url: str  # as configured, a token in it shown as its placeholder (``bot{token}``)
    policy: str
    tail: str  # the URL's last path segments the routes begin with, e.g. "/v10"
    routes_begin: str  # how the routes spell those segments, e.g. "/{version}"
    suggested_url: str  # the URL without the tail, e.g. "https://discord.com/api"
    unreachable: tuple[str, ...]  # names of the routes no request can match
    route_count: int  # every route of the policy, the default included
    example: str  # one request that now lands on another route, in words
    kind: str = "policy"  # "pack" for a shipped pack

    def message(self) -> str:
        """One paragraph: what is wrong, what it does, what to configure instead."""
        return (
            f"upstream {self.upstream!r}: its URL {self.url} ends in {self.tail}, where the"
            f" {self.policy} {self.kind}'s routes begin ({self.routes_begin}/...), so"
            f" {len(self.unreachable)} of its {self.route_count} routes can never match and"
            f" their requests are handled by other routes ({self.example}). Use"
            f" {self.suggested_url} as the upstream's URL; the agent then keeps"
            f" {self.tail} in the paths it sends (its base URL for this upstream ends in"
            f" /{self.upstream}{self.tail})"
        )


def misplaced_base_url(upstream: str, url: str, policy: Policy) -> MisplacedBaseUrl | None:
    """The problem with ``url`` as ``policy``'s upstream URL, or None if its routes are reachable.

    The shortest URL tail that some route begins with is the one reported: each segment more
    only makes the suggested URL shorter than it needs to be.
    """
    parts = urlsplit(url)
    url_segments = [segment for segment in parts.path.split("/") if segment]
    routes = [route for route in policy.routes if not is_rest(segments(route.match.path)[0])]
    for length in range(1, len(url_segments) + 1):
        tail = url_segments[-length:]
        unreachable = [route for route in routes if _begins_with(route, tail)]
        if not unreachable:
            continue
        kept = "/".join(url_segments[:-length])
        suggested = urlunsplit((parts.scheme, parts.netloc, f"/{kept}" if kept else "", "", ""))
        first = unreachable[0]
        begin = segments(first.match.path)[:length]
        shown = (_shown(part, segment) for part, segment in zip(begin, tail, strict=True))
        shown_tail = "/" + "/".join(shown)
        return MisplacedBaseUrl(
            upstream=upstream,
            url=suggested + shown_tail,
            policy=policy.name,
            tail=shown_tail,
            routes_begin="/" + "/".join(begin),
            suggested_url=suggested,
            unreachable=tuple(route.name for route in unreachable),
            route_count=len(policy.routes) + 1,
            example=_example(upstream, first, length, policy),
            kind="pack" if policy.name in shipped_packs() else "policy",
        )
    return None


def _shown(template_segment: str, url_segment: str) -> str:
    """A URL segment as a warning may show it: a token (``bot{token}``) never reaches a log."""
    return template_segment if param_prefix(template_segment) else url_segment


def _begins_with(route: Route, tail: list[str]) -> bool:
    template = segments(route.match.path)
    if len(template) < len(tail):
        return False
    return all(_fits(part, segment) for part, segment in zip(template, tail, strict=False))


def _fits(template_segment: str, url_segment: str) -> bool:
    if is_rest(template_segment):
        return False  # it takes anything, so it says nothing about where routes begin
    if is_param(template_segment):
        prefix = param_prefix(template_segment)
        if prefix:  # ``bot{token}``: a URL ending in the bot's token, as Telegram's SDKs show it
            rest = url_segment.removeprefix(prefix)
            return url_segment.startswith(prefix) and _TOKEN_LIKE.fullmatch(rest) is not None
        return _VERSION_SEGMENT.fullmatch(url_segment) is not None
    return template_segment == url_segment


def _example(upstream: str, route: Route, length: int, policy: Policy) -> str:
    """What becomes of a request the agent sends for ``route`` below the URL as configured."""
    rest = segments(route.match.path)[length:]
    shown = "/" + "/".join(rest)
    sample = "/" + "/".join(
        param_prefix(part) + _SAMPLE_VALUE if is_param(part) else part for part in rest
    )
    method = next((m for m in route.match.methods if m != "*"), "POST")
    taken = RouteMatcher(policy).match(method, sample)
    lost = _differences(route, taken)
    return (
        f"a {method} to /{upstream}{shown if rest else ''} is handled as {taken.name!r}"
        f" instead of {route.name!r}" + (f" and loses {_listed(lost)}" if lost else "")
    )


def _differences(intended: Route, taken: Route) -> list[str]:
    """What ``intended`` would have done for a request that ``taken`` handles instead."""
    lost = []
    if intended.effect is not taken.effect:
        lost.append(f"its {intended.effect} handling (it is treated as {taken.effect})")
    if intended.native_key and not taken.native_key:
        lost.append("the upstream's own dedupe key")
    if intended.external_id and not taken.external_id:
        lost.append("its external id")
    if intended.compensation and not taken.compensation:
        lost.append("its compensation")
    return lost


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def misplaced_base_urls(
    urls: Mapping[str, str], policies: Mapping[str, Policy]
) -> list[MisplacedBaseUrl]:
    """Every upstream of ``urls`` (name -> URL) whose URL hides routes of its policy."""
    found = (misplaced_base_url(name, url, policies[name]) for name, url in sorted(urls.items()))
    return [problem for problem in found if problem is not None]
