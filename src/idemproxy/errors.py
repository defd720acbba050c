"""Errors a user can cause, as one tree.

::

    IdemproxyError
     +-- ConfigError       a bad config file, flag, variable or policy; the CLI exits 2 with it
     +-- RequestRefused    a request answered with a problem document instead of being forwarded

Store failures have their own tree in :mod:`idemproxy.store.errors`, since the store imports
nothing of ours above it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class IdemproxyError(Exception):
    """Base of every error a user of idemproxy can cause."""


class ConfigError(IdemproxyError):
    """Configuration that cannot be used; the message names the source, the field and the fix."""


class ProblemCode(StrEnum):
    MISSING_IDEMPOTENCY_KEY = "missing-idempotency-key"
    INVALID_IDEMPOTENCY_KEY = "invalid-idempotency-key"
    INVALID_REQUEST = "invalid-request"
    UNKNOWN_UPSTREAM = "unknown-upstream"
    REQUEST_IN_PROGRESS = "request-in-progress"
    OUTCOME_UNKNOWN = "outcome-unknown"
    BODY_TOO_LARGE = "body-too-large"
    UNSUPPORTED_CONTENT_ENCODING = "unsupported-content-encoding"
    IDEMPOTENCY_KEY_REUSED = "idempotency-key-reused"
    TOOL_CALL_ALREADY_ACTED = "tool-call-already-acted"
    UPSTREAM_UNREACHABLE = "upstream-unreachable"
    UPSTREAM_DISCONNECTED = "upstream-disconnected"
    STORE_UNAVAILABLE = "store-unavailable"
    STORE_NOT_REPLICATED = "store-not-replicated"
    STORE_UNSAFE = "store-unsafe"  # the store may lose records (eviction, no persistence)
    STORE_RECORDS_LOST = "store-records-lost"  # it did; until an operator acknowledges it
    UPSTREAM_TIMEOUT = "upstream-timeout"
    SHUTTING_DOWN = "shutting-down"
    AGENT_PAUSED = "agent-paused"
    # Idem-Compensates without the seal of the proxy's own sender (effects/seal.py).
    FORGED_COMPENSATION = "forged-compensation"
    # A repeat of an effect an operator's compensation undid: never replayed as done.
    EFFECT_COMPENSATED = "effect-compensated"
    # Effects held for an operator's approval before they are sent (effects/approval.py).
    APPROVAL_REQUIRED = "approval-required"
    APPROVAL_EXPIRED = "approval-expired"
    APPROVAL_DENIED = "approval-denied"
    # Answers of the admin API (and of the CLI working on a store directly).
    UNAUTHORIZED = "unauthorized"
    NOT_FOUND = "not-found"
    STATE_CONFLICT = "state-conflict"
    RATE_LIMITED = "rate-limited"
    # What a web page can make a browser send (admin/forgery.py).
    FOREIGN_HOST = "foreign-host"
    CROSS_ORIGIN_REQUEST = "cross-origin-request"
    UNSUPPORTED_MEDIA_TYPE = "unsupported-media-type"


class RequestRefused(IdemproxyError):
    """A request the proxy answers itself; ``detail`` tells the agent what to do next."""

    def __init__(
        self,
        code: ProblemCode,
        detail: str,
        *,
        retry_after_s: int | None = None,
        extra: dict[str, Any] | None = None,
        effect_key: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.extra = extra or {}
        self.effect_key = effect_key
