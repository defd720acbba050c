"""JSON documents of the ledger's values: what the admin API answers, the CLI prints with
``--json``, and the recovery controller receives. One shape for each value, wherever it goes.

Response bodies never appear (they may be large, and they are the upstream's business); a
document says how big the stored body is.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import quote

from idemproxy.store.approvals import Approval, approval_link
from idemproxy.store.journal import DeliveryCursor
from idemproxy.store.records import EffectEvent, EffectMeta, EffectRecord

Document = dict[str, Any]


def review_path(key: str) -> str:
    """The admin API path of one effect in the review queue."""
    return "/v1/review/" + quote(key, safe="")


def _meta(meta: EffectMeta) -> Document:
    return {
        "batch": meta.batch,
        "tool_call": meta.tool_call,
        "action": meta.action,
        "upstream": meta.upstream,
        "method": meta.method,
        "path": meta.path,
    }


def record(record: EffectRecord) -> Document:
    meta, response = record.meta, record.response
    return {
        "effect_key": str(record.key),
        "agent": record.key.agent,
        "effect_id": record.key.effect_id,
        "state": record.state.value,
        **_meta(meta),
        "status": record.status,
        "response_bytes": len(response.body) if response else 0,
        "external_id": record.external_id,
        "reason": record.reason,
        "attempts": record.attempts,
        "created_ms": record.created_ms,
        "updated_ms": record.updated_ms,
        "lease_expires_ms": record.lease_expires_ms,
        "review": review_path(str(record.key)),
    }


def approval(approval: Approval) -> Document:
    """An approval as the admin API and the console show it (its summary holds no secret)."""
    return {
        "approval_id": approval.approval_id,
        "agent": approval.key.agent,
        "effect_key": str(approval.key),
        "state": approval.state.value,
        **_meta(approval.meta),
        "rule": approval.rule,
        "summary": approval.summary,
        "requested_ms": approval.requested_ms,
        "requests": approval.requests,
        "decided_ms": approval.decided_ms,
        "valid_until_ms": approval.valid_until_ms,
        "valid_s": approval.valid_ms // 1000,
        "actor": approval.actor,
        "note": approval.note,
        "link": approval_link(approval.key.agent, approval.approval_id),
    }


def event(event: EffectEvent) -> Document:
    meta = event.meta
    return {
        # What one kind of event adds (an approval's id, rule, actor): never a field below.
        **event.extra,
        "event_id": event.event_id,
        "type": event.type.value,
        "agent": event.key.agent,
        # An event of the agent that no one effect caused (an operator's pause) names none.
        "effect_key": str(event.key) if event.key.effect_id else "",
        "effect_id": event.key.effect_id,
        **_meta(meta),
        "status": event.status,
        "external_id": event.external_id,
        "reason": event.reason,
        "state": event.state,
        "ts_ms": event.ts_ms,
    }


def delivery(agent: str, cursor: DeliveryCursor, backlog: int) -> Document:
    """Where delivery of one agent's events stands."""
    return {
        "agent": agent,
        "backlog": backlog,
        "acked": cursor.acked,
        "parked": cursor.parked,
        "parked_ms": cursor.parked_ms,
        "attempts": cursor.attempts,
        "retry_at_ms": cursor.retry_at_ms,
        "last_error": cursor.last_error,
        "owner": cursor.owner,
    }


def value(item: Any) -> Document:
    """A dataclass of the ledger (progress, plan, audit entry) as plain JSON types."""
    document: Document = _plain(dataclasses.asdict(item))
    return document


def _plain(item: Any) -> Any:
    if isinstance(item, dict):
        return {key: _plain(value) for key, value in item.items()}
    if isinstance(item, list | tuple):
        return [_plain(value) for value in item]
    if isinstance(item, str):
        return str(item)  # a StrEnum as its bare value
    return item
