"""Run what an upstream adapter decides: native keys on the way out, settling unknown outcomes.

The adapter (``policies/adapters``) says what to send and how an unknown outcome may be proven;
this module does the sending and writes the verdict with the store's compare-and-set
``resolve``, so of two repeats settling the same key only one wins, and the other finds the
result of the winner when it claims again.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import ClientResponse, ClientSession, web
from multidict import CIMultiDict
from yarl import URL

from idemproxy.policies.adapters.base import Answer, Attempt, Found, Outgoing, Settle, Verdict
from idemproxy.proxy.forward import Exchange, UpstreamFailure
from idemproxy.proxy.headers import client_response_headers, own_read_headers
from idemproxy.proxy.outcome import Outcome, outcome_headers
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import (
    EffectRecord,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    Settlement,
    StoredResponse,
)

if TYPE_CHECKING:
    from idemproxy.proxy.effects import EffectContext

log = logging.getLogger(__name__)

READ_BACK_MAX_BYTES = 1 << 20
_JSON_HEADERS = (("Content-Type", "application/json"),)


@dataclass(frozen=True, slots=True)
class Reconciled:
    """An unknown outcome an adapter settled. ``record`` is the completed effect to replay;
    None means the key is free (or someone else settled it first): claim again."""

    record: EffectRecord | None = None


@dataclass(frozen=True, slots=True)
class Verified:
    """The answer to a native-key request whose upstream status called for a read-back."""

    response: web.Response
    outcome: Outcome
    settlement: Settlement


class NativeDedupe:
    def __init__(self, store: RecordStore, session: ClientSession) -> None:
        self.store = store
        self.session = session

    def outgoing(self, ctx: EffectContext) -> Outgoing:
        """What this attempt sends: the agent's body, rewritten to carry the native key."""
        if not ctx.route.native_key:
            return Outgoing(ctx.body)
        return ctx.target.upstream.adapter.outgoing(_attempt(ctx))

    async def reconcile(self, ctx: EffectContext, record: EffectRecord) -> Reconciled | None:
        """Settle an unknown outcome where the adapter can prove it safe; None: review."""
        adapter = ctx.target.upstream.adapter
        # What the attempt in doubt sent: its native key was cut from the record's first attempt.
        ctx = dataclasses.replace(ctx, first_attempt_ms=record.created_ms)
        sent = self.outgoing(ctx)
        if not sent.native:
            return None
        try:
            age_ms = await self.age_ms(record)
        except StoreError:
            return None  # the store is down: the claim after this one will say so
        plan = adapter.settle(ctx.target.path, age_ms)
        if plan is Settle.RESEND:
            reason = f"{adapter.name}: the native key is inside its dedupe window; re-sent under it"
            return await self._resolve(ctx, Resolution(RecordState.NOT_APPLIED, reason=reason))
        if plan is Settle.READ_BACK:
            verdict = await self._read_back(ctx, sent)
            if verdict.found is Found.PRESENT:
                response = StoredResponse(200, _JSON_HEADERS, verdict.body)
                resolution = Resolution(
                    RecordState.COMPLETED,
                    response=response,
                    external_id=verdict.external_id,
                    reason=f"{adapter.name}: read back, the effect exists",
                    ttl_s=ctx.route.ttl_s,
                )
                return await self._resolve(ctx, resolution)
            if verdict.found is Found.ABSENT:
                absent = f"{adapter.name}: read back, the effect does not exist"
                reason = _with_detail(absent, verdict)
                return await self._resolve(ctx, Resolution(RecordState.NOT_APPLIED, reason=reason))
        return None

    async def settles(self, ctx: EffectContext) -> bool:
        """True when an unknown outcome of this request could be settled by a retry now."""
        if not self.outgoing(ctx).native:
            return False
        try:
            record = await self.store.get(ctx.key.record_key)
            if record is None:
                return False
            age_ms = await self.age_ms(record)
        except StoreError:
            return False
        return ctx.target.upstream.adapter.settle(ctx.target.path, age_ms) is not Settle.REVIEW

    async def age_ms(self, record: EffectRecord) -> int:
        """How long ago the record's first attempt was claimed, when its native key was first
        sent at the earliest. By the store's clock, which wrote ``created_ms``: the proxy
        host's clock may differ from Redis's by more than a dedupe window is long."""
        return await self.store.now_ms() - record.created_ms

    def verifies(self, ctx: EffectContext, sent: Outgoing, status: int) -> bool:
        """True when this answer to a native-key request must be checked by a read-back."""
        return sent.native and ctx.target.upstream.adapter.verifies(ctx.target.path, status)

    async def verify(self, ctx: EffectContext, sent: Outgoing, answer: ClientResponse) -> Verified:
        """Read the effect back after an ambiguous answer, and say what the agent gets."""
        try:
            body = await answer.read()
        except (aiohttp.ClientError, TimeoutError):
            body = b""
        verdict = await self._read_back(ctx, sent)
        name = ctx.target.upstream.adapter.name
        if verdict.found is Found.PRESENT:
            reason = f"{name}: upstream answered {answer.status}; read back, the effect exists"
            stored = StoredResponse(200, _JSON_HEADERS, verdict.body)
            settlement = Settlement(
                RecordState.COMPLETED,
                response=stored,
                external_id=verdict.external_id,
                reason=reason,
                ttl_s=ctx.route.ttl_s,
            )
            headers: CIMultiDict[str] = CIMultiDict(_JSON_HEADERS)
            headers["Idempotent-Replayed"] = "true"
            headers.extend(outcome_headers(Outcome.RECONCILED, str(ctx.key)))
            response = web.Response(status=200, body=verdict.body, headers=headers)
            return Verified(response, Outcome.RECONCILED, settlement)
        state = RecordState.NOT_APPLIED if verdict.found is Found.ABSENT else RecordState.UNKNOWN
        reason = _with_detail(
            f"{name}: upstream answered {answer.status}; read back: {verdict.found}", verdict
        )
        headers = client_response_headers(answer.headers)
        headers.popall("Content-Length", None)
        headers.extend(outcome_headers(Outcome.FORWARDED, str(ctx.key)))
        response = web.Response(status=answer.status, body=body, headers=headers)
        settlement = Settlement(state, reason=reason, ttl_s=ctx.route.ttl_s)
        return Verified(response, Outcome.FORWARDED, settlement)

    async def _resolve(self, ctx: EffectContext, resolution: Resolution) -> Reconciled:
        key = ctx.key.record_key
        try:
            result = await self.store.resolve(ResolveRequest(key, RecordState.UNKNOWN, resolution))
        except StoreError:
            log.warning("could not record a reconciliation", extra={"effect_key": str(key)})
            return Reconciled()
        if not isinstance(result, Resolved):
            return Reconciled()  # another repeat settled it first; its result stands
        log.info(
            "unknown outcome reconciled",
            extra={"effect_key": str(key), "state": str(resolution.state)},
        )
        completed = result.record.state is RecordState.COMPLETED
        return Reconciled(result.record if completed else None)

    async def _read_back(self, ctx: EffectContext, sent: Outgoing) -> Verdict:
        adapter = ctx.target.upstream.adapter
        attempt = _attempt(ctx)
        reads = adapter.read_back(attempt, sent)
        if not reads:
            return Verdict(Found.UNSURE)
        upstream = ctx.target.upstream
        headers = own_read_headers(ctx.request.headers)
        answers = []
        for read in reads:
            url = URL(upstream.base_url + read.path_qs, encoded=True)
            reading = Exchange(self.session, "GET", url, headers, None, upstream.timeout)
            try:
                async with reading as answer:
                    body = await answer.content.read(READ_BACK_MAX_BYTES)
                    answers.append(Answer(answer.status, body))
            except (UpstreamFailure, aiohttp.ClientError, TimeoutError) as exc:
                log.warning("read-back failed: %s", exc, extra={"effect_key": str(ctx.key)})
                return Verdict(Found.UNSURE)
        return adapter.verdict(attempt, sent, answers)


def _attempt(ctx: EffectContext) -> Attempt:
    return Attempt(
        path=ctx.target.path,
        effect_key=str(ctx.key),
        body=ctx.body,
        content_type=ctx.request.headers.get("Content-Type", ""),
        first_attempt_ms=ctx.first_attempt_ms,
        volatile_fields=ctx.route.volatile_fields,
    )


def _with_detail(reason: str, verdict: Verdict) -> str:
    return f"{reason} ({verdict.detail})" if verdict.detail else reason
