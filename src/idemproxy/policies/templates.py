"""Path templates: compiled to a regex for matching, and compared for reachability.

A template is ``/``-separated; ``{name}`` matches one non-empty segment, ``prefix{name}`` a
segment that starts with the literal ``prefix`` and goes on (Telegram's ``bot{token}``), and
``{name*}`` (last segment only) matches the rest of the path, including nothing. A trailing ``/``
on a request is ignored.
"""

from __future__ import annotations

import re


def segments(template: str) -> list[str]:
    return template.split("/")[1:]


def is_rest(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("*}")


def is_param(segment: str) -> bool:
    """``{name}`` or ``prefix{name}``: one segment (a valid template has no other braces)."""
    return segment.endswith("}") and "{" in segment and not is_rest(segment)


def param_prefix(segment: str) -> str:
    """The literal before a parameter's ``{``: ``bot`` of ``bot{token}``, ``""`` of ``{id}``."""
    return segment.partition("{")[0]


def param_name(segment: str) -> str:
    """The name of a parameter segment: ``token`` of ``bot{token}``, ``rest`` of ``{rest*}``."""
    return segment.partition("{")[2].rstrip("*}")


def param_names(template: str) -> frozenset[str]:
    """Every parameter a template names, the rest parameter included."""
    return frozenset(
        param_name(segment)
        for segment in segments(template)
        if is_param(segment) or is_rest(segment)
    )


def compile_template(template: str) -> re.Pattern[str]:
    """``/channels/{id}/messages`` -> a regex over the request path (query excluded)."""
    parts: list[str] = []
    for segment in segments(template):
        if is_rest(segment):
            parts.append(f"(?:/(?P<{param_name(segment)}>.*))?")
        elif is_param(segment):
            prefix = re.escape(param_prefix(segment))
            parts.append(f"/{prefix}(?P<{param_name(segment)}>[^/]+)")
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
    return _segment_covers(wide[0], narrow[0]) and _covers(wide[1:], narrow[1:])


def _segment_covers(wide: str, narrow: str) -> bool:
    if not is_param(wide):
        return wide == narrow
    # A placeholder needs a character after its prefix: a literal empty segment ("//"), or
    # "bot" itself under "bot{token}", never matches it.
    prefix = param_prefix(wide)
    if is_param(narrow):
        return param_prefix(narrow).startswith(prefix)
    return narrow.startswith(prefix) and len(narrow) > len(prefix)


def methods_cover(wider: tuple[str, ...], narrower: tuple[str, ...]) -> bool:
    """True when every method ``narrower`` takes is also taken by ``wider``."""
    if "*" in wider:
        return True
    return "*" not in narrower and set(narrower) <= set(wider)
