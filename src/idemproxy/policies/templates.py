"""Path templates: compiled to a regex for matching, and compared for reachability.

A template is ``/``-separated; ``{name}`` matches one non-empty segment, ``{name*}`` (last segment
only) matches the rest of the path, including nothing. A trailing ``/`` on a request is ignored.
"""

from __future__ import annotations

import re


def segments(template: str) -> list[str]:
    return template.split("/")[1:]


def is_rest(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("*}")


def is_param(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("}") and not is_rest(segment)


def compile_template(template: str) -> re.Pattern[str]:
    """``/channels/{id}/messages`` -> a regex over the request path (query excluded)."""
    parts: list[str] = []
    for segment in segments(template):
        if is_rest(segment):
            parts.append(f"(?:/(?P<{segment[1:-2]}>.*))?")
        elif is_param(segment):
            parts.append(f"/(?P<{segment[1:-1]}>[^/]+)")
        else:
            parts.append("/" + re.escape(segment))
    return re.compile("".join(parts) + "/?")


def template_covers(wider: str, narrower: str) -> bool:
    """True when every path ``narrower`` matches is also matched by ``wider``."""
    return _covers(segments(wider), segments(narrower))


def _covers(wide: list[str], narrow: list[str]) -> bool:
    if wide and is_rest(wide[0]):
        return True
    if not narrow:
        return not wide
    if not wide or is_rest(narrow[0]):
        return False
    head = narrow[0]
    # A literal empty segment ("//") never matches a placeholder, which needs a character.
    fits = (is_param(head) or head != "") if is_param(wide[0]) else wide[0] == head
    return fits and _covers(wide[1:], narrow[1:])


def methods_cover(wider: tuple[str, ...], narrower: tuple[str, ...]) -> bool:
    """True when every method ``narrower`` takes is also taken by ``wider``."""
    if "*" in wider:
        return True
    return "*" not in narrower and set(narrower) <= set(wider)
