"""The approvals of the Redis store (store/approvals.py): one script per step, each deciding as
store/approvals.py's functions do, by Redis's clock (``scripts/*_approval*.lua``).

An approval's hash, the agent's open approvals, its outbox and its audit stream are keys of
:mod:`.keys` in the agent's slot, so each step is one script on one slot (Redis Cluster too).
The agent is listed on the worklists before each step, as before a claim (:mod:`.agents`).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.approvals import (
    MAX_SUMMARY_CHARS,
    Approval,
    ApprovalState,
    DecideRequest,
    HoldRequest,
)
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import EffectMeta, RecordKey
from idemproxy.store.redis import lua
from idemproxy.store.redis.agents import RedisAgents
from idemproxy.store.redis.approval_args import (
    DecideApprovalArgs,
    ExpireApprovalsArgs,
    HoldApprovalArgs,
    TakeApprovalArgs,
)
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.fields import ApprovalField as F
from idemproxy.store.redis.journal import audit_args
from idemproxy.store.redis.keys import (
    approval_key,
    approvals_key,
    audit_key,
    cursor_key,
    outbox_key,
)
from idemproxy.store.retention import Retention


def step_keys(agent: str, approval_id: str) -> list[str]:
    """The keys of a hold or a take: the approval, the open ones, the outbox, the cursor."""
    return [
        approval_key(agent, approval_id),
        approvals_key(agent),
        outbox_key(agent),
        cursor_key(agent),
    ]


class RedisApprovals:
    """The :class:`~idemproxy.store.protocols.Approvals` of
    :class:`~idemproxy.store.redis.store.RedisStore`."""

    def __init__(
        self, client: Redis | RedisCluster, agents: RedisAgents, retention: Retention
    ) -> None:
        """Events go to the outbox, kept ``retention.events_s``; decisions' audit entries are
        kept ``retention.audit_s``."""
        self._client = client
        self._agents = agents
        self._retention = retention
        self._hold = client.register_script(lua.HOLD_APPROVAL.source)
        self._decide = client.register_script(lua.DECIDE_APPROVAL.source)
        self._take = client.register_script(lua.TAKE_APPROVAL.source)
        self._expire = client.register_script(lua.EXPIRE_APPROVALS.source)

    async def hold(self, request: HoldRequest) -> Approval:
        key, meta = request.key, request.meta
        args = HoldApprovalArgs(
            approval_id=request.approval_id,
            effect_id=key.effect_id,
            fingerprint=request.fingerprint,
            batch=meta.batch,
            tool_call=meta.tool_call,
            action=meta.action,
            upstream=meta.upstream,
            method=meta.method,
            path=meta.path,
            rule=request.rule,
            summary=request.summary[:MAX_SUMMARY_CHARS],
            keep_ms=request.keep_ms,
            valid_ms=request.valid_ms,
            retention_ms=self._retention.events_ms,
        )
        reply: Any
        with translated("hold"):
            reply = await self._agents.listed(
                key.agent,
                lambda: self._hold(
                    keys=step_keys(key.agent, request.approval_id),
                    args=lua.HOLD_APPROVAL.argv(args),
                ),
            )
        return decode_approval(key.agent, reply)

    async def decide(self, request: DecideRequest) -> Approval | None:
        agent = request.agent
        args = DecideApprovalArgs(
            approve=request.approve,
            actor=request.actor,
            note=request.note,
            audit=audit_args(request.audit, self._retention.audit_ms),
            retention_ms=self._retention.events_ms,
        )
        keys = [
            approval_key(agent, request.approval_id),
            approvals_key(agent),
            audit_key(agent),
            outbox_key(agent),
            cursor_key(agent),
        ]
        reply: Any
        with translated("decide"):
            reply = await self._agents.listed(
                agent, lambda: self._decide(keys=keys, args=lua.DECIDE_APPROVAL.argv(args))
            )
        return decode_approval(agent, reply) if reply else None

    async def take(self, agent: str, approval_id: str) -> Approval | None:
        args = lua.TAKE_APPROVAL.argv(TakeApprovalArgs(self._retention.events_ms))
        reply: Any
        with translated("take"):
            reply = await self._agents.listed(
                agent, lambda: self._take(keys=step_keys(agent, approval_id), args=args)
            )
        return decode_approval(agent, reply[1]) if int(reply[0]) == 1 else None

    async def get_approval(self, agent: str, approval_id: str) -> Approval | None:
        raw: Any
        with translated("get_approval"):
            raw = await self._client.hgetall(approval_key(agent, approval_id))
        return decode_approval(agent, raw) if raw else None

    async def list_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        if limit <= 0:
            return []
        ids: Any
        found: Any
        with translated("list_approvals"):
            ids = await self._client.zrange(approvals_key(agent), 0, limit - 1)
            async with self._client.pipeline(transaction=False) as pipe:
                for approval_id in ids:
                    pipe.hgetall(approval_key(agent, approval_id.decode()))
                found = await pipe.execute()
        # One settled between the two reads is no longer open: it is not listed.
        approvals = [decode_approval(agent, raw) for raw in found if raw]
        return [approval for approval in approvals if approval.open]

    async def expire_approvals(self, agent: str, limit: int = 100) -> list[Approval]:
        ids: Any
        reply: Any
        with translated("expire_approvals"):
            ids = await self._client.zrange(approvals_key(agent), 0, -1)
            if not ids or limit <= 0:
                return []
            names = tuple(approval_id.decode() for approval_id in ids)
            keys = [approvals_key(agent), outbox_key(agent), cursor_key(agent)]
            keys += [approval_key(agent, approval_id) for approval_id in names]
            args = lua.EXPIRE_APPROVALS.argv(
                ExpireApprovalsArgs(self._retention.events_ms, limit, names)
            )
            reply = await self._agents.listed(agent, lambda: self._expire(keys=keys, args=args))
        return [decode_approval(agent, raw) for raw in reply]


def decode_approval(agent: str, raw: Any) -> Approval:
    """An approval from its hash: ``HGETALL`` as a dict of bytes, or flat from a script."""
    try:
        fields: dict[bytes, bytes]
        fields = raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))

        def text(name: F) -> str:
            return fields[name.encode()].decode()

        return Approval(
            approval_id=text(F.ID),
            key=RecordKey(agent, text(F.EFFECT_ID)),
            fingerprint=text(F.FINGERPRINT),
            meta=EffectMeta(
                batch=text(F.BATCH),
                tool_call=text(F.TOOL_CALL),
                action=text(F.ACTION),
                upstream=text(F.UPSTREAM),
                method=text(F.METHOD),
                path=text(F.PATH),
            ),
            state=ApprovalState(text(F.STATE)),
            rule=text(F.RULE),
            summary=text(F.SUMMARY),
            requested_ms=int(text(F.REQUESTED_MS)),
            decided_ms=int(text(F.DECIDED_MS)),
            valid_until_ms=int(text(F.VALID_UNTIL_MS)),
            actor=text(F.ACTOR),
            note=text(F.NOTE),
            keep_ms=int(text(F.KEEP_MS)),
            requests=int(text(F.REQUESTS)),
            valid_ms=int(fields.get(F.VALID_MS.encode(), b"0")),
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise StoreCorrupt(f"an approval of agent {agent!r} cannot be decoded: {exc!r}") from exc
