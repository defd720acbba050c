"""Hypothesis strategies for path templates, request paths and methods, drawn from small
alphabets so that generated templates and paths often meet."""

from __future__ import annotations

import functools
import re

from hypothesis import strategies as st

from idemproxy.policies.templates import compile_template

LITERALS = st.sampled_from(["a", "b", "v10"])
# A placeholder stands alone in its segment or after a literal prefix ("v{p}", like "bot{token}").
PREFIXES = st.sampled_from(["", "", "v", "v1"])
SEGMENTS = st.one_of(LITERALS, PREFIXES.map(lambda prefix: prefix + "{p}"))
PATH_SEGMENTS = st.one_of(LITERALS, st.sampled_from(["c", "", "a.b", "v", "v1"]))
METHODS = st.sampled_from(["GET", "POST", "PUT", "DELETE"])


@st.composite
def templates(draw: st.DrawFn) -> str:
    # Placeholders are numbered apart: a template may not name two alike.
    parts = [
        part.replace("{p}", f"{{p{index}}}")
        for index, part in enumerate(draw(st.lists(SEGMENTS, max_size=4)))
    ]
    if draw(st.booleans()):
        parts.append("{rest*}")
    return "/" + "/".join(parts)


@st.composite
def paths(draw: st.DrawFn) -> str:
    path = "/" + "/".join(draw(st.lists(PATH_SEGMENTS, max_size=5)))
    return path + ("/" if draw(st.booleans()) else "")


@functools.cache
def compiled(template: str) -> re.Pattern[str]:
    return compile_template(template)


def matches(template: str, path: str) -> bool:
    """Whether ``template`` takes the whole of ``path``."""
    return compiled(template).fullmatch(path) is not None
