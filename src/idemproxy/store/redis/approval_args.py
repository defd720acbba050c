"""The arguments of the approvals' Lua scripts, as :mod:`.argv` has them for the others: one
typed tuple per script, its fields the script's named ARGV in order."""

from __future__ import annotations

from typing import NamedTuple

from idemproxy.store.redis.argv import AuditArgs


class HoldApprovalArgs(NamedTuple):
    approval_id: str
    effect_id: str
    fingerprint: str
    batch: str
    tool_call: str
    action: str
    upstream: str
    method: str
    path: str
    rule: str
    summary: str  # cut to store/approvals.py's MAX_SUMMARY_CHARS already
    keep_ms: int
    valid_ms: int  # how long an approval is usable once given
    retention_ms: int  # the outbox's


class DecideApprovalArgs(NamedTuple):
    approve: bool  # false denies
    actor: str
    note: str
    audit: AuditArgs
    retention_ms: int  # the outbox's


class TakeApprovalArgs(NamedTuple):
    retention_ms: int  # the outbox's


class ExpireApprovalsArgs(NamedTuple):
    retention_ms: int  # the outbox's
    limit: int
    approval_ids: tuple[str, ...]
