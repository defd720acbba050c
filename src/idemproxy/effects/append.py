"""Append routes: read the value back and send only what its end does not already hold.

Before an attempt of an append route sends anything, the value is read (``append.read``) and
its end compared with the text the request adds:

- all of the text is there: answered ``already present`` from the read, nothing is sent
- its first part is there (an append cut off midway): only the rest is sent
- none of it: the request is sent as it came

The answer's ``Idem-Append`` header says which (``present``, ``remainder``, ``appended``), and
``Idem-Append-Skipped-Bytes`` how many bytes of the text were not sent because the value held
them. With ``ignore_surrounding_whitespace`` a value whose end holds the text but for
whitespace around it (an upstream that trims what it stores) counts as ``present``. An append
whose outcome is unknown needs no review: the next attempt's read-back reconciles it. The
first two cases are the proxy's own decisions, so each is written to the audit log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from enum import StrEnum

import aiohttp
import orjson
from aiohttp import ClientSession, web
from yarl import URL

from idemproxy.effects.answers import done_answer
from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.effects.outcome import Outcome
from idemproxy.effects.reconciled import ClaimAgain
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.jsonpointer import replace_at, resolve
from idemproxy.policies.append import AppendRule
from idemproxy.policies.placeholders import MissingValue, Values, fill_text, path_params
from idemproxy.proxy.forward import Exchange, UpstreamFailure
from idemproxy.proxy.headers import own_read_headers
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import (
    RecordKey,
    RecordState,
    Resolution,
    ResolveRequest,
    Settlement,
    StoredResponse,
)

log = logging.getLogger(__name__)

APPEND_HEADER = "Idem-Append"
SKIPPED_HEADER = "Idem-Append-Skipped-Bytes"
READ_MAX_BYTES = 8 << 20


class AppendCase(StrEnum):
    PRESENT = "present"  # the whole text is already at the end: nothing sent
    REMAINDER = "remainder"  # its first part is: only the rest sent
    APPENDED = "appended"  # none of it is: sent as it came


@dataclass(frozen=True, slots=True)
class Send:
    """Send this request: the agent's, with only what the value's end lacks."""

    context: EffectContext


@dataclass(frozen=True, slots=True)
class Present:
    """The whole text is already there: answer ``response``, recorded by ``settlement`` and
    audited by ``audit``, and send nothing."""

    response: web.Response
    settlement: Settlement
    audit: AuditEntry


Checked = Send | Present


def tail_overlap(value: str, text: str) -> int:
    """The length of the longest start of ``text`` that ``value`` ends with (KMP, linear)."""
    if not text:
        return 0
    tail = value[-len(text) :]
    joined = [*text, None, *tail]  # None never equals a character: matches cannot span it
    border = [0] * len(joined)
    for index in range(1, len(joined)):
        length = border[index - 1]
        while length and joined[index] != joined[length]:
            length = border[length - 1]
        if joined[index] == joined[length]:
            length += 1
        border[index] = length
    return border[-1]


def decide(
    value: str, text: str, min_overlap_chars: int, ignore_whitespace: bool = False
) -> tuple[AppendCase, str]:
    """The case, and the text still to append. ``ignore_whitespace``: the text is present too
    when the value's end holds it but for whitespace around either."""
    trimmed = text.strip()
    if ignore_whitespace and trimmed and value.rstrip().endswith(trimmed):
        return AppendCase.PRESENT, ""
    overlap = tail_overlap(value, text)
    if text and overlap == len(text):
        return AppendCase.PRESENT, ""
    if overlap >= min_overlap_chars:
        return AppendCase.REMAINDER, text[overlap:]
    return AppendCase.APPENDED, text


@dataclass(frozen=True, slots=True)
class CurrentValue:
    """The value as the upstream showed it: its text, and the answer it came in."""

    value: str
    body: bytes = b""
    content_type: str = ""


class AppendGuard:
    def __init__(self, store: RecordStore, session: ClientSession, audit: EffectAudit) -> None:
        self.store = store
        self.session = session
        self.audit = audit

    async def check(self, ctx: EffectContext, rule: AppendRule) -> Checked:
        """Read the value back and decide; ``RequestRefused`` when that cannot be done."""
        text = _appended_text(rule, ctx.body)
        current = await self._read(ctx, rule)
        case, rest = decide(
            current.value, text, rule.min_overlap_chars, rule.ignore_surrounding_whitespace
        )
        skipped = len(text.encode()) - len(rest.encode())
        log.info("append checked: %s", case, extra={"effect_key": str(ctx.key), "skipped": skipped})
        headers = ((APPEND_HEADER, case.value), (SKIPPED_HEADER, str(skipped)))
        if case is AppendCase.PRESENT:
            # Only a value that was read can hold the text, so the read answered 200.
            stored_headers = (("Content-Type", current.content_type), *headers)
            stored = StoredResponse(200, stored_headers, current.body)
            reason = (
                f"append: the text was already at the end of the value; nothing sent"
                f" ({skipped} bytes skipped)"
            )
            settlement = Settlement(
                RecordState.COMPLETED, response=stored, reason=reason, ttl_s=ctx.route.ttl_s
            )
            audit = _audit(ctx, AutoAction.APPEND_PRESENT, "completed", reason)
            answer = done_answer(stored, Outcome.RECONCILED, str(ctx.key))
            return Present(answer, settlement, audit)
        if case is AppendCase.REMAINDER:
            # Decided before the rest is sent: the entry says what was left out, and why.
            note = f"append: the value already ended with {skipped} bytes of the text"
            after = f"sending the remaining {len(rest.encode())} bytes"
            await self.audit.write(_audit(ctx, AutoAction.APPEND_REMAINDER, after, note))
        body = ctx.body if case is AppendCase.APPENDED else _with_text(rule, ctx.body, rest)
        return Send(replace(ctx, body=body, answer_headers=headers))

    async def reconcile(self, key: RecordKey) -> ClaimAgain:
        """Let an append whose outcome is unknown be claimed again: that attempt's read-back,
        before it sends anything, tells what the value holds."""
        reason = "append: outcome settled by reading the value back before sending again"
        resolution = Resolution(RecordState.NOT_APPLIED, reason=reason)
        audit = automatic(
            key.agent, AutoAction.RECONCILED, str(key), "unknown", "not_applied", reason
        )
        try:
            await self.store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution, audit))
        except StoreError:
            log.warning("could not reconcile an unknown append", extra={"effect_key": str(key)})
        return ClaimAgain()

    async def _read(self, ctx: EffectContext, rule: AppendRule) -> CurrentValue:
        upstream = ctx.target.upstream
        values = Values(path_params(ctx.route.match.path, ctx.target.path), request=ctx.body)
        try:
            path = fill_text(rule.read, values, in_path=True)
        except MissingValue as exc:
            raise _refused(f"append.read cannot be filled: {exc}") from None
        headers = own_read_headers(ctx.request.headers)
        url = URL(upstream.base_url + path, encoded=True)
        try:
            async with Exchange(self.session, "GET", url, headers, None, upstream.timeout) as got:
                body = await got.content.read(READ_MAX_BYTES)
                status, content_type = got.status, got.headers.get("Content-Type", "text/plain")
        except (UpstreamFailure, aiohttp.ClientError, TimeoutError) as exc:
            raise _refused(f"reading the value back failed ({exc})") from exc
        if status == 404:
            return CurrentValue("")  # nothing there yet: the append starts it
        if status != 200:
            raise _refused(f"reading the value back answered {status}")
        return CurrentValue(_current_value(rule, body), body, content_type)


def _audit(ctx: EffectContext, action: AutoAction, after: str, note: str) -> AuditEntry:
    key = ctx.key.record_key
    return automatic(key.agent, action, str(key), "in_flight", after, note)


def _refused(why: str) -> RequestRefused:
    return RequestRefused(
        ProblemCode.UPSTREAM_UNREACHABLE,
        f"{why}, so nothing was appended: without the current value a repeat could double the"
        " text; retrying is safe",
        retry_after_s=1,
    )


def _text_at(body: bytes, pointer: str | None) -> str | None:
    """The text at ``pointer`` of a JSON body (the whole body as text without a pointer)."""
    if pointer is None:
        return body.decode("utf-8", "replace")
    try:
        text = resolve(orjson.loads(body), pointer)
    except orjson.JSONDecodeError:
        return None
    return text if isinstance(text, str) else None


def _appended_text(rule: AppendRule, body: bytes) -> str:
    text = _text_at(body, rule.content)
    if text is None:
        raise RequestRefused(
            ProblemCode.INVALID_REQUEST,
            f"this append route takes the text to append at {rule.content} of a JSON body;"
            " nothing was sent: put the text there",
        )
    return text


def _with_text(rule: AppendRule, body: bytes, text: str) -> bytes:
    """The request body with only ``text`` left to append."""
    if rule.content is None:
        return text.encode()
    document = orjson.loads(body)
    replace_at(document, rule.content, text)
    return orjson.dumps(document)


def _current_value(rule: AppendRule, body: bytes) -> str:
    value = _text_at(body, rule.value)
    if value is None:
        raise _refused(f"the value read back has no text at {rule.value} (append.value)")
    return value
