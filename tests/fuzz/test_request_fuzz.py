"""Hypothesis against ``idemproxy serve`` over raw sockets: request targets and key headers.

Whatever the target or key headers, the answer is the upstream's (forwarded or replayed) or a
clean refusal: a problem document, or aiohttp's own 400 for bytes that are not HTTP. No answer
is a bare 500, nothing outside the configured base path is forwarded to, the trap listener is
never reached, and no effect key is ever forwarded twice.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import Served, upstream_paths, within_base
from tests.support.rawhttp import RawAnswer, request_bytes

pytestmark = pytest.mark.e2e

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
KEY_PROBLEMS = {"invalid-idempotency-key", "invalid-request", "missing-idempotency-key"}

pieces = st.sampled_from(
    ["up", "..", ".", "%2e", "%2E%2e", "%2f", "%2F", "%5c", "\\", "@", ":", ";", "?", "#", "//",
     "127.0.0.1", "http:", "%00", "%", "%%", "~", "*", "%ff", "\xe9", "api", "x=1&y", "/"]
)  # fmt: skip
words = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=6)
# Most targets name the configured upstream, so the fuzzing reaches past the first segment.
prefixes = st.sampled_from(["/up/", "/up/", "/up/", "/up", "/", "//", "/%75p/", "/UP/"])
targets = st.builds(
    lambda prefix, parts: prefix + "".join(parts),
    prefixes,
    st.lists(st.one_of(pieces, words), max_size=8),
)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "FOO"])

# Key header values, as bytes: plausible ids (a few often, so keys repeat and replay), and in
# some examples one header made hostile: any Latin-1 text, or any bytes but CR and LF (which
# would end the header line), NUL and control bytes included.
plausible = st.one_of(
    st.sampled_from(["b1", "c1", "s1", "agent-x", "k-1"]),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40),
).map(str.encode)
hostile = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=300).map(
        lambda text: text.encode("latin-1")
    ),
    st.binary(max_size=300).map(lambda value: value.replace(b"\r", b"").replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b'"quoted"', b'"', b"a,b", b"x" * 256, b"x" * 255, b"%00"]),
)
KEY_HEADERS = (
    "Idem-Batch", "Idem-Tool-Call", "Idem-Agent", "Idem-Step", "Idem-Action", "Idempotency-Key"
)  # fmt: skip
key_headers = st.tuples(*(st.one_of(st.none(), plausible) for _ in KEY_HEADERS))
spoiler = st.one_of(st.none(), st.tuples(st.integers(0, len(KEY_HEADERS) - 1), hostile))

forwarded_keys: set[str] = set()


def assert_clean(answer: RawAnswer | None) -> RawAnswer:
    """An answer came, and it is the upstream's or a deliberate refusal: never a bare 500."""
    assert answer is not None
    outcome = answer.headers.get("idem-outcome")
    assert outcome is not None or answer.status == 400, answer  # else: aiohttp's parser said no
    event(f"{answer.status} {outcome or 'refused by the HTTP parser'}")
    return answer


@FUZZ
@given(method=methods, target=targets)
def test_fuzzed_targets_never_leave_the_configured_upstream(
    served: Served, method: str, target: str
) -> None:
    key: list[tuple[str | bytes, str | bytes]] = [("Idempotency-Key", uuid.uuid4().hex)]
    request = request_bytes(method, target.encode("latin-1", "replace"), key, b"{}")
    answer = assert_clean(served.send(request))
    assert answer.status < 500 or answer.headers["idem-outcome"] == "forwarded"
    assert within_base(upstream_paths(served))
    assert served.trap.accepted == 0


@FUZZ
@given(chosen=key_headers, spoiled=spoiler)
def test_fuzzed_key_headers_get_one_effect_per_key_or_a_clean_refusal(
    served: Served, chosen: tuple[bytes | None, ...], spoiled: tuple[int, bytes] | None
) -> None:
    header_values = list(chosen)
    if spoiled is not None:
        header_values[spoiled[0]] = spoiled[1]
    headers: list[tuple[str | bytes, str | bytes]] = [
        (name, value)
        for name, value in zip(KEY_HEADERS, header_values, strict=True)
        if value is not None
    ]
    before = len(upstream_paths(served))
    answer = assert_clean(served.send(request_bytes("POST", "/up/effects", headers, b'{"x":1}')))
    outcome = answer.headers.get("idem-outcome")
    if answer.status == 200:
        assert outcome in ("forwarded", "replayed")
        key = answer.headers["idem-key"]
        if outcome == "forwarded":
            assert key not in forwarded_keys, f"{key} forwarded twice"
            forwarded_keys.add(key)
        assert len(upstream_paths(served)) == before + (outcome == "forwarded")
    else:
        assert answer.status == 400
        assert outcome is None or outcome in KEY_PROBLEMS
        assert len(upstream_paths(served)) == before


def test_the_proxy_survived_the_fuzzing(served: Served) -> None:
    served.assert_still_serving()
