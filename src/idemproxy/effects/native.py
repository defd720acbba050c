"""Run what an upstream adapter decides: native keys on the way out, reconciling unknown outcomes.

The adapter (``policies/adapters``) says what to send and how an unknown outcome may be proven;
this module does the sending and writes the finding with the store's compare-and-set
``resolve``, so of two repeats reconciling the same key only one wins, and the other finds the
result of the winner when it claims again.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import aiohttp
from aiohttp import ClientResponse, ClientSession, web
from yarl import URL

from idemproxy.effects.answers import JSON_HEADERS, done_answer, read_answer
from idemproxy.effects.audit import AutoAction, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.effects.outcome import Outcome
from idemproxy.effects.reconciled import ClaimAgain, Completed, Reconciliation, Review
from idemproxy.policies.adapters.base import Answer, Attempt, Finding, Found, Outgoing, Plan
from idemproxy.proxy.forward import Exchange, UpstreamFailure
from idemproxy.proxy.headers import own_read_headers
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import AuditEntry
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

log = logging.getLogger(__name__)

READ_BACK_MAX_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ReconciledAnswer:
    """The answer to a native-key request whose upstream status called for a read-back, and
    the audit entry of the outcome the read-back settled."""

    response: web.Response
    outcome: Outcome
    settlement: Settlement
    audit: AuditEntry


class NativeDedupe:
    def __init__(self, store: RecordStore, session: ClientSession) -> None:
        self.store = store
        self.session = session

    def outgoing(self, ctx: EffectContext) -> Outgoing:
        """What this attempt sends: the agent's body, rewritten to carry the native key."""
        if not ctx.route.native_key:
            return Outgoing(ctx.body)
        return ctx.target.upstream.adapter.outgoing(_attempt(ctx))

    async def reconcile(self, ctx: EffectContext, record: EffectRecord) -> Reconciliation:
        """Resolve an unknown outcome where the adapter can prove it, or leave it for review."""
        adapter = ctx.target.upstream.adapter
        # What the attempt in doubt sent: its native key was cut from the record's first attempt.
        ctx = dataclasses.replace(ctx, first_attempt_ms=record.created_ms)
        sent = self.outgoing(ctx)
        if not sent.native:
            return Review()
        try:
            age_ms = await self.age_ms(record)
        except StoreError:
            return Review()  # the store is down: the claim after this one will say so
        plan = adapter.plan(ctx.target.path, age_ms)
        if plan is Plan.RESEND:
            reason = f"{adapter.name}: the native key is inside its dedupe window; re-sent under it"
            return await self._resolve(ctx, Resolution(RecordState.NOT_APPLIED, reason=reason))
        if plan is Plan.READ_BACK:
            finding = await self._read_back(ctx, sent)
            if finding.found is Found.PRESENT:
                response = StoredResponse(200, JSON_HEADERS, finding.body)
                resolution = Resolution(
                    RecordState.COMPLETED,
                    response=response,
                    external_id=finding.external_id,
                    reason=f"{adapter.name}: read back, the effect exists",
                    ttl_s=ctx.route.ttl_s,
                )
                return await self._resolve(ctx, resolution)
            if finding.found is Found.ABSENT:
                absent = f"{adapter.name}: read back, the effect does not exist"
                reason = _with_detail(absent, finding)
                return await self._resolve(ctx, Resolution(RecordState.NOT_APPLIED, reason=reason))
        return Review()

    async def reconciles_on_retry(self, ctx: EffectContext) -> bool:
        """True when an unknown outcome of this request could be reconciled by a retry now."""
        if not self.outgoing(ctx).native:
            return False
        try:
            record = await self.store.get(ctx.key.record_key)
            if record is None:
                return False
            age_ms = await self.age_ms(record)
        except StoreError:
            return False
        return ctx.target.upstream.adapter.plan(ctx.target.path, age_ms) is not Plan.REVIEW

    async def age_ms(self, record: EffectRecord) -> int:
        """How long ago the record's first attempt was claimed, when its native key was first
        sent at the earliest. By the store's clock, which wrote ``created_ms``: the proxy
        host's clock may differ from Redis's by more than a dedupe window is long."""
        return await self.store.now_ms() - record.created_ms

    def reconciles_answer(self, ctx: EffectContext, sent: Outgoing, status: int) -> bool:
        """True when this answer to a native-key request must be checked by a read-back."""
        return sent.native and ctx.target.upstream.adapter.reconciles_answer(
            ctx.target.path, status
        )

    async def reconcile_answer(
        self, ctx: EffectContext, sent: Outgoing, answer: ClientResponse
    ) -> ReconciledAnswer:
        """Read the effect back after an ambiguous answer, and say what the agent gets."""
        try:
            body = await answer.read()
        except (aiohttp.ClientError, TimeoutError):
            body = b""
        finding = await self._read_back(ctx, sent)
        name = ctx.target.upstream.adapter.name
        if finding.found is Found.PRESENT:
            reason = f"{name}: upstream answered {answer.status}; read back, the effect exists"
            stored = StoredResponse(200, JSON_HEADERS, finding.body)
            settlement = Settlement(
                RecordState.COMPLETED,
                response=stored,
                external_id=finding.external_id,
                reason=reason,
                ttl_s=ctx.route.ttl_s,
            )
            response = done_answer(stored, Outcome.RECONCILED, str(ctx.key))
            audit = _audit(ctx, "in_flight", settlement)
            return ReconciledAnswer(response, Outcome.RECONCILED, settlement, audit)
        state = RecordState.NOT_APPLIED if finding.found is Found.ABSENT else RecordState.UNKNOWN
        reason = _with_detail(
            f"{name}: upstream answered {answer.status}; read back: {finding.found}", finding
        )
        response = read_answer(answer, body, str(ctx.key))
        settlement = Settlement(state, reason=reason, ttl_s=ctx.route.ttl_s)
        return ReconciledAnswer(
            response, Outcome.FORWARDED, settlement, _audit(ctx, "in_flight", settlement)
        )

    async def _resolve(self, ctx: EffectContext, resolution: Resolution) -> Completed | ClaimAgain:
        key = ctx.key.record_key
        # Written in the resolve's own step: the audit holds the reconcile iff it happened.
        audit = _audit(ctx, "unknown", resolution)
        try:
            result = await self.store.resolve(
                ResolveRequest(key, RecordState.UNKNOWN, resolution, audit)
            )
        except StoreError:
            log.warning("could not record a reconciliation", extra={"effect_key": str(key)})
            return ClaimAgain()
        if not isinstance(result, Resolved):
            return ClaimAgain()  # another repeat resolved it first; its result stands
        log.info(
            "unknown outcome reconciled",
            extra={"effect_key": str(key), "state": str(resolution.state)},
        )
        if result.record.state is RecordState.COMPLETED:
            return Completed(result.record)
        return ClaimAgain()

    async def _read_back(self, ctx: EffectContext, sent: Outgoing) -> Finding:
        adapter = ctx.target.upstream.adapter
        attempt = _attempt(ctx)
        reads = adapter.read_back(attempt, sent)
        if not reads:
            return Finding(Found.UNSURE)
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
                return Finding(Found.UNSURE)
        return adapter.finding(attempt, sent, answers)


def _attempt(ctx: EffectContext) -> Attempt:
    return Attempt(
        path=ctx.target.path,
        effect_key=str(ctx.key),
        body=ctx.body,
        content_type=ctx.request.headers.get("Content-Type", ""),
        first_attempt_ms=ctx.first_attempt_ms,
        volatile_fields=ctx.route.volatile_fields,
    )


def _audit(ctx: EffectContext, before: str, outcome: Settlement | Resolution) -> AuditEntry:
    """The entry of an outcome the adapter settled or resolved, as the proxy's own change."""
    key = ctx.key.record_key
    after = str(outcome.state)
    return automatic(key.agent, AutoAction.RECONCILED, str(key), before, after, outcome.reason)


def _with_detail(reason: str, finding: Finding) -> str:
    return f"{reason} ({finding.detail})" if finding.detail else reason
