"""Effect keys: which side effect a request is, resolved from its headers (SPEC section 3).

Order of precedence: the agent's batch and tool call (stable across a crash and restart), then
an explicit ``Idempotency-Key``, then the route's ``on_missing_key`` rule. A client SDK's own
random key only protects that SDK's retries, which is why the tool-call identity wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.policies.kinds import OnMissingKey, ToolCallEffects
from idemproxy.policies.route import Route
from idemproxy.store.records import RecordKey

AGENT_HEADER = "Idem-Agent"
BATCH_HEADER = "Idem-Batch"
TOOL_CALL_HEADER = "Idem-Tool-Call"
STEP_HEADER = "Idem-Step"
ACTION_HEADER = "Idem-Action"
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"

MAX_ID_CHARS = 255
# Visible ASCII only: ids end up in headers, logs and store keys.
_ID = re.compile(r"[\x21-\x7e]{1,255}")
_BARE_KEY = re.compile(r"[\x21\x23-\x2b\x2d-\x7e]{1,255}")  # visible ASCII minus '"' and ','
_SF_STRING = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


class KeySource(StrEnum):
    TOOL_CALL = "tool_call"
    EXPLICIT = "explicit"
    CONTENT = "content"


@dataclass(frozen=True, slots=True)
class KeyHeaders:
    """The raw key-related header values of one request (None when absent)."""

    agent: str | None = None
    batch: str | None = None
    tool_call: str | None = None
    step: str | None = None
    action: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class EffectKey:
    record_key: RecordKey
    source: KeySource
    # A key the client chose itself (Idempotency-Key, Idem-Step): reusing it for a different
    # request is refused. Digest-derived keys change with the request, so they never clash.
    explicit: bool
    batch: str = ""
    tool_call: str = ""
    action: str = ""

    def __str__(self) -> str:
        return str(self.record_key)


_PART_SAFE = "-._~!$&'()*+,;=@"
# A part that holds only characters quote() leaves alone is returned as it is: ids are mostly
# UUIDs and tokens, and one regular expression costs a fraction of quote().
_UNQUOTED_PART = re.compile(f"[A-Za-z0-9{re.escape(_PART_SAFE)}]*")


def _part(value: str) -> str:
    if _UNQUOTED_PART.fullmatch(value):
        return value
    return quote(value, safe=_PART_SAFE)


def _checked_id(header: str, value: str) -> str:
    if not _ID.fullmatch(value):
        raise RequestRefused(
            ProblemCode.INVALID_IDEMPOTENCY_KEY,
            f"{header} must be 1-{MAX_ID_CHARS} visible ASCII characters without spaces;"
            " send a stable id such as a UUID",
        )
    return value


def parse_idempotency_key(value: str) -> str:
    """An ``Idempotency-Key`` as a structured-field string (``"abc"``) or a bare token."""
    value = value.strip()
    quoted = _SF_STRING.fullmatch(value)
    if quoted:
        key = re.sub(r"\\(.)", r"\1", quoted.group(1))
        if 1 <= len(key) <= MAX_ID_CHARS:
            return key
    elif _BARE_KEY.fullmatch(value):
        return value
    raise RequestRefused(
        ProblemCode.INVALID_IDEMPOTENCY_KEY,
        f"Idempotency-Key must be a quoted string or a token of 1-{MAX_ID_CHARS} visible ASCII"
        ' characters, e.g. Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"',
    )


def resolve_agent(headers: KeyHeaders, configured_agent: str, allow_agent_header: bool) -> str:
    if headers.agent is None:
        return configured_agent
    agent = _checked_id(AGENT_HEADER, headers.agent)
    if not allow_agent_header and agent != configured_agent:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"this sidecar is pinned to agent {configured_agent!r}; drop the {AGENT_HEADER}"
            " header or send that value",
        )
    return agent


def resolve_effect_key(
    headers: KeyHeaders,
    route: Route,
    agent: str,
    request_fingerprint: str,
) -> EffectKey | None:
    """The effect key of a request on an effectful route; None means forward unprotected."""
    action = _checked_id(ACTION_HEADER, headers.action) if headers.action else route.name
    if headers.batch is not None or headers.tool_call is not None:
        if headers.batch is None or headers.tool_call is None:
            raise RequestRefused(
                ProblemCode.INVALID_IDEMPOTENCY_KEY,
                f"send {BATCH_HEADER} and {TOOL_CALL_HEADER} together: the pair identifies"
                " one tool call of one batch",
            )
        batch = _checked_id(BATCH_HEADER, headers.batch)
        tool_call = _checked_id(TOOL_CALL_HEADER, headers.tool_call)
        if headers.step is not None:
            step = "s-" + _part(_checked_id(STEP_HEADER, headers.step))
        elif route.tool_call_effects is ToolCallEffects.ONE:
            # Not the digest: the LLM may word a re-run anew, and that must not act again.
            step = "r-" + route.name
        else:
            step = "d-" + request_fingerprint[:32]
        effect_id = f"tc:{_part(batch)}:{_part(tool_call)}:{step}"
        return EffectKey(
            RecordKey(agent, effect_id),
            KeySource.TOOL_CALL,
            explicit=headers.step is not None,
            batch=batch,
            tool_call=tool_call,
            action=action,
        )
    if headers.idempotency_key is not None:
        key = parse_idempotency_key(headers.idempotency_key)
        record_key = RecordKey(agent, f"ik:{_part(key)}")
        return EffectKey(record_key, KeySource.EXPLICIT, explicit=True, action=action)
    if route.on_missing_key is OnMissingKey.PASSTHROUGH:
        return None
    if route.on_missing_key is OnMissingKey.CONTENT:
        # The window slides: the record of this content lives content_window_s (the flow sets
        # its TTL), so a retry is one effect with the first for that long after it, whatever
        # the clock reads. Fixed buckets split a retry from its first attempt at every edge.
        effect_id = f"ct:{request_fingerprint[:32]}"
        record_key = RecordKey(agent, effect_id)
        return EffectKey(record_key, KeySource.CONTENT, explicit=False, action=action)
    raise RequestRefused(
        ProblemCode.MISSING_IDEMPOTENCY_KEY,
        f"route {route.name!r} has external effects: send {BATCH_HEADER} and"
        f" {TOOL_CALL_HEADER} (or an {IDEMPOTENCY_KEY_HEADER}) so a repeat of this call is"
        " recognised and not acted on twice",
    )
