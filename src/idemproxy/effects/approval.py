"""Effects held for an operator's approval before they are sent (docs/approvals.md).

A request on a route whose ``approval:`` holds it is sent only under an approval of its own
payload (store/approvals.py)::

    before the claim: a record stands (not freed) -> the record decides, as for any request
                      approved, not yet used        -> claim it, then take the approval
                      anything else                 -> ask for approval, refuse: 428 / 403
    once claimed:     take the approval -> used by this attempt: forward it
                                        -> none to take: release the claim unsent, refuse

The claim makes one attempt at a time hold the key, and the take makes one attempt use the
approval, so an approval is spent by exactly one forward, on whichever proxy. The agent's
repeat of the same request is the one forwarded: the proxy keeps no request to send itself,
since that would mean keeping its credentials.
"""

from __future__ import annotations

from dataclasses import dataclass

from idemproxy.effects.audit import AutoAction, EffectAudit, automatic
from idemproxy.effects.context import EffectContext
from idemproxy.effects.refusals import store_unavailable
from idemproxy.effects.settler import Settler
from idemproxy.effects.summary import request_summary
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.metrics import Metrics
from idemproxy.policies.approval import ApprovalRule, Subject, held_because
from idemproxy.policies.subject import body_document
from idemproxy.policies.templates import compile_template
from idemproxy.store.approvals import (
    Approval,
    Approvals,
    ApprovalState,
    HoldRequest,
    approval_id,
    approval_link,
)
from idemproxy.store.errors import StoreError
from idemproxy.store.protocols import RecordStore
from idemproxy.store.records import RecordState, Settlement

NOT_FORWARDED = "not forwarded: it waits for an operator's approval"


@dataclass(frozen=True, slots=True)
class Held:
    """A request its route holds for approval: under which rule, and why."""

    rule: ApprovalRule
    reason: str  # the condition that holds, as the operator reads it
    approval_id: str


class ApprovalGate:
    """Holds what needs approval; lets through the one attempt an approval was given for."""

    def __init__(
        self,
        records: RecordStore,
        approvals: Approvals,
        settler: Settler,
        audit: EffectAudit,
        metrics: Metrics,
    ) -> None:
        self._records = records
        self._approvals = approvals
        self._settler = settler
        self._audit = audit
        self._metrics = metrics

    def held(self, ctx: EffectContext) -> Held | None:
        """Whether the request needs approval; an operator's own compensation never does."""
        rule = ctx.route.approval
        if rule is None or ctx.operator:
            return None
        body: object = None
        if any(condition.field is not None for condition in rule.when):
            body = body_document(ctx.body, ctx.request.headers.get("Content-Type", ""))
        params: dict[str, str] = {}
        if rule.params():
            match = compile_template(ctx.route.match.path).fullmatch(ctx.target.path)
            params = {k: v for k, v in match.groupdict().items() if v} if match else {}
        reason = held_because(rule, Subject(body, params, ctx.tool))
        if reason is None:
            return None
        return Held(rule, reason, approval_id(ctx.key.record_key, ctx.fingerprint))

    async def admit(self, ctx: EffectContext) -> Held | None:
        """Before the claim: None when the request needs no approval; its hold when it does
        and its claim may go ahead (a record stands that decides what it gets, or an approval
        waits to be used). Refused otherwise."""
        held = self.held(ctx)
        if held is None:
            return None
        key = ctx.key.record_key
        try:
            record = await self._records.get(key)
            if record is not None and record.state is not RecordState.NOT_APPLIED:
                return held
            found = await self._approvals.get_approval(key.agent, held.approval_id)
            if await self._usable(found):
                return held
            raise await self._refusal(ctx, held, found)
        except StoreError as exc:
            raise store_unavailable() from exc

    async def _usable(self, approval: Approval | None) -> bool:
        """Approved and still valid by the store's clock. The take decides for good; asking
        first spares an expired approval a claim that would only be released."""
        if approval is None or approval.state is not ApprovalState.APPROVED:
            return False
        return approval.valid_until_ms > await self._records.now_ms()

    async def on_claimed(self, ctx: EffectContext, held: Held, fence: int) -> None:
        """Use the approval for this attempt, or give the claim back unsent and refuse."""
        key = ctx.key.record_key
        try:
            used = await self._approvals.take(key.agent, held.approval_id)
            if used is not None and used.state is ApprovalState.USED:
                self._count(ctx, "used")
                await self._note(ctx, AutoAction.APPROVAL_USED, used, f"attempt at fence {fence}")
                return
            found = await self._approvals.get_approval(key.agent, held.approval_id)
        except StoreError as exc:
            # Nothing was sent; the claim lapses unknown if even this release cannot be written.
            await self._release(ctx, fence)
            raise store_unavailable() from exc
        await self._release(ctx, fence)
        try:
            raise await self._refusal(ctx, held, found)
        except StoreError as exc:
            raise store_unavailable() from exc

    async def _release(self, ctx: EffectContext, fence: int) -> None:
        released = Settlement(RecordState.NOT_APPLIED, reason=NOT_FORWARDED, ttl_s=ctx.route.ttl_s)
        await self._settler.settle(ctx, fence, released, counted=False)

    async def _refusal(
        self, ctx: EffectContext, held: Held, before: Approval | None
    ) -> RequestRefused:
        """Ask for approval (again, where the last one expired or was spent) and say so."""
        request = HoldRequest(
            ctx.key.record_key,
            ctx.fingerprint,
            ctx.meta(),
            held.reason,
            request_summary(ctx),
            keep_ms=ctx.route.ttl_s * 1000,
            valid_ms=held.rule.approval_ttl_s * 1000,
        )
        approval = await self._approvals.hold(request)
        if approval.state is ApprovalState.DENIED:
            return _denied(ctx, approval)
        awaiting = approval.state is ApprovalState.AWAITING
        asked = awaiting and (before is None or before.state is not ApprovalState.AWAITING)
        lapsed = (ApprovalState.APPROVED, ApprovalState.EXPIRED)
        expired = awaiting and before is not None and before.state in lapsed
        if expired:
            self._count(ctx, "expired")
            await self._note(ctx, AutoAction.APPROVAL_EXPIRED, approval, "unused in time")
        if asked:
            self._count(ctx, "requested")
            await self._note(ctx, AutoAction.APPROVAL_REQUESTED, approval, held.reason)
        return _awaiting(ctx, held, approval, expired)

    def _count(self, ctx: EffectContext, event: str) -> None:
        self._metrics.approvals.labels(ctx.target.upstream.name, event).inc()

    async def _note(
        self, ctx: EffectContext, action: AutoAction, approval: Approval, note: str
    ) -> None:
        agent = ctx.key.record_key.agent
        entry = automatic(agent, action, approval.approval_id, "", str(approval.state), note)
        await self._audit.write(entry)


def _document(ctx: EffectContext, approval: Approval) -> dict[str, object]:
    agent = ctx.key.record_key.agent
    return {
        "approval": {
            "id": approval.approval_id,
            "state": str(approval.state),
            "reason": approval.rule,
            "link": approval_link(agent, approval.approval_id),
        }
    }


def _awaiting(ctx: EffectContext, held: Held, approval: Approval, expired: bool) -> RequestRefused:
    ago = "the approval it had expired unused, so " if expired else ""
    return RequestRefused(
        ProblemCode.APPROVAL_EXPIRED if expired else ProblemCode.APPROVAL_REQUIRED,
        f"{ago}this request waits for an operator's approval ({held.reason}) and was not sent;"
        f" send the same request again after {held.rule.retry_after_s} s: once approved it is"
        f" sent once. Approval {approval.approval_id}",
        retry_after_s=held.rule.retry_after_s,
        extra=_document(ctx, approval),
    )


def _denied(ctx: EffectContext, approval: Approval) -> RequestRefused:
    note = f": {approval.note}" if approval.note else ""
    return RequestRefused(
        ProblemCode.APPROVAL_DENIED,
        f"an operator denied this request ({approval.actor or 'unnamed'}){note}. It was not sent"
        " and will not be: change the plan rather than send it again",
        extra={**_document(ctx, approval), "note": approval.note},
    )
