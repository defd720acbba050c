"""One route of a policy: which requests it takes and how their effects are protected."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from idemproxy.jsonpointer import WILDCARD, pointer_tokens
from idemproxy.policies.append import AppendRule
from idemproxy.policies.approval import ApprovalRule
from idemproxy.policies.compensation import Compensation
from idemproxy.policies.document import Frozen, LocatedError
from idemproxy.policies.kinds import EffectClass, OnMissingKey, ToolCallEffects
from idemproxy.policies.match import Match
from idemproxy.policies.templates import param_names
from idemproxy.store.retention import MAX_RECORD_TTL_S

_POINTER = re.compile(r"^(/([^~/]|~[01])*)+$")


class RetryPolicy(Frozen):
    """Automatic retries, only ever applied to ``safe`` routes."""

    attempts: Annotated[int, Field(ge=1, le=10)] = 3
    base_delay_ms: Annotated[int, Field(ge=1, le=60_000)] = 100
    max_delay_ms: Annotated[int, Field(ge=1, le=300_000)] = 5_000
    statuses: tuple[int, ...] = (429, 502, 503, 504)
    honour_retry_after: bool = True


class Route(Frozen):
    """Which requests of the upstream a rule takes, and how their effects are protected."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
    match: Match = Match()
    effect: EffectClass = EffectClass.EXTERNAL
    on_missing_key: OnMissingKey = OnMissingKey.REJECT
    tool_call_effects: ToolCallEffects = ToolCallEffects.MANY
    volatile_fields: tuple[str, ...] = ()
    content_window_s: Annotated[int, Field(ge=1, le=86_400)] = 300
    coalesce_wait_ms: Annotated[int, Field(ge=0, le=600_000)] = 5_000
    lease_ms: Annotated[int, Field(ge=100, le=3_600_000)] = 30_000
    ttl_s: Annotated[int, Field(ge=1, le=MAX_RECORD_TTL_S)] = 86_400
    max_body_bytes: Annotated[int, Field(ge=0, le=1 << 30)] = 10 * 1024 * 1024
    max_recorded_bytes: Annotated[int, Field(ge=0, le=1 << 30)] = 8 * 1024 * 1024
    # The policy's adapter gives this route the upstream's own dedupe key and may settle an
    # unknown outcome of it (re-send inside the window, or read back).
    native_key: bool = False
    not_applied_statuses: tuple[int, ...] = (429,)
    external_id: str | None = None
    allow_set_cookie: bool = False
    retry: RetryPolicy | None = None
    # An append route reads the value back first, so a repeat never doubles text.
    append: AppendRule | None = None
    # How a completed effect of this route is undone (recover --strategy compensate).
    compensation: Compensation | None = None
    # Path parameters that carry a credential (a webhook or bot token): forwarded as they
    # came, but stored, shown and logged as their ``{name}`` only.
    secret_path_params: tuple[str, ...] = ()
    # Effects an operator approves before they are sent (policies/approval.py).
    approval: ApprovalRule | None = None

    @field_validator("volatile_fields")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pointer in value:
            check_pointer(pointer)
        return value

    @field_validator("external_id")
    @classmethod
    def _external_id_pointer(cls, value: str | None) -> str | None:
        if value is not None:
            check_pointer(value)
            if WILDCARD in pointer_tokens(value):
                raise ValueError(
                    f"external_id {value!r} must name one value: '*' is for volatile_fields"
                )
        return value

    @field_validator("not_applied_statuses")
    @classmethod
    def _statuses(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        for status in value:
            if not 100 <= status <= 599:
                raise ValueError(f"{status} is not an HTTP status code (100-599)")
        return value

    @model_validator(mode="after")
    def _retry_only_when_safe(self) -> Route:
        if self.retry is not None and self.effect is not EffectClass.SAFE:
            raise ValueError(
                f"route {self.name!r}: 'retry' is only allowed on safe routes; an {self.effect}"
                " effect is never repeated automatically"
            )
        if self.tool_call_effects is ToolCallEffects.ONE and self.effect is EffectClass.SAFE:
            raise ValueError(
                f"route {self.name!r}: 'tool_call_effects' counts effects; a safe route has"
                " none, so remove it or make the route external"
            )
        if self.ttl_s * 1000 < self.lease_ms:
            # The record is held while in flight, but a TTL shorter than one lease says the
            # route's numbers are confused: refuse it rather than guess which one is meant.
            raise ValueError(
                f"route {self.name!r}: ttl_s {self.ttl_s} is shorter than its lease_ms"
                f" {self.lease_ms}; set ttl_s to at least {-(-self.lease_ms // 1000)}"
            )
        if self.native_key and self.effect is EffectClass.SAFE:
            raise ValueError(
                f"route {self.name!r}: 'native_key' protects effects; a safe route has none,"
                " so remove it or make the route external"
            )
        return self

    @model_validator(mode="after")
    def _templates_fit(self) -> Route:
        if self.append is not None and self.effect is not EffectClass.EXTERNAL:
            raise ValueError(f"route {self.name!r}: 'append' is for external routes")
        if self.compensation is not None and self.effect is EffectClass.SAFE:
            raise ValueError(f"route {self.name!r}: a safe route has no effect to compensate")
        params = param_names(self.match.path)
        self._check_secrets(params)
        if self.append is not None:
            # An append reads back with the request at hand, which still holds its secrets.
            self.append.check_fits(params)
        if self.compensation is not None:
            self.compensation.check_fits(params, frozenset(self.secret_path_params))
        if self.approval is not None:
            self._check_approval(self.approval, params)
        return self

    def _check_approval(self, approval: ApprovalRule, params: frozenset[str]) -> None:
        if self.effect is EffectClass.SAFE:
            raise ValueError(f"route {self.name!r}: a safe route sends no effect to approve")
        for name in sorted(approval.params() - params):
            known = ", ".join(sorted(params)) or "none"
            raise ValueError(
                f"route {self.name!r}: an approval condition names param {name!r}, which is no"
                f" parameter of {self.match.path} (it has: {known})"
            )

    def _check_secrets(self, params: frozenset[str]) -> None:
        seen: set[str] = set()
        for index, name in enumerate(self.secret_path_params):
            where = ("secret_path_params", index)
            if name not in params:
                known = ", ".join(sorted(params)) or "none"
                raise LocatedError(
                    where,
                    f"route {self.name!r}: secret_path_params names {name!r}, which is no"
                    f" parameter of {self.match.path} (it has: {known})",
                )
            if name in seen:
                raise LocatedError(where, f"route {self.name!r}: {name!r} is listed twice")
            seen.add(name)


def check_pointer(pointer: str) -> None:
    if not _POINTER.match(pointer):
        raise ValueError(
            f"{pointer!r} is not a JSON pointer (RFC 6901): write it like '/nonce' or"
            " '/record/createdAt'"
        )
