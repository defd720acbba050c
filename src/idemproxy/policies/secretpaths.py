"""Secret path parameters: the path of an effect as it may be stored and shown.

Some APIs carry a credential in the path: a Telegram bot's ``/bot<token>/sendMessage``, a
Discord webhook's ``/webhooks/<id>/<token>``. A route lists such parameters in
``secret_path_params``; the upstream gets the path as it came, but the record (and so every
event, admin answer, CLI table and controller payload made from it) keeps the path with each of
them replaced by its ``{name}``: ``/bot{token}/sendMessage``. The request digest is still taken
over the real path, so two tokens remain two effects, and the digest is all that is kept of it.
"""

from __future__ import annotations

import functools
import re

from idemproxy.policies.route import Route
from idemproxy.policies.templates import compile_template

# What is shown of a path the route's template does not fit: only a default route, whose
# template takes no part in matching, sees such paths, and nothing of them is known to be safe.
REDACTED_PATH = "/<redacted>"


@functools.lru_cache(maxsize=256)
def _pattern(template: str) -> re.Pattern[str]:
    return compile_template(template)


def shown_path(route: Route, path: str) -> str:
    """``path`` (below the upstream, decoded) with the route's secret parameters as ``{name}``."""
    if not route.secret_path_params:
        return path
    match = _pattern(route.match.path).fullmatch(path)
    if match is None:
        return REDACTED_PATH
    spans = sorted(
        (match.span(name), name)
        for name in route.secret_path_params
        if match.group(name)  # a rest parameter that matched nothing hides nothing
    )
    shown: list[str] = []
    end = 0
    for (start, stop), name in spans:
        shown += [path[end:start], "{", name, "}"]
        end = stop
    shown.append(path[end:])
    return "".join(shown)
