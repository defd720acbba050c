"""Policy documents: the routes of one upstream and how each one's effects are protected.

Models are frozen and reject unknown keys, so a typo in a policy file is an error, not a
silently ignored setting. Quantities carry their unit in the field name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from idemproxy.jsonpointer import WILDCARD, pointer_tokens
from idemproxy.policies.append import AppendRule
from idemproxy.policies.compensation import Compensation
from idemproxy.policies.templates import (
    is_param,
    is_rest,
    methods_cover,
    param_name,
    param_names,
    template_covers,
)
from idemproxy.store.retention import MAX_RECORD_TTL_S


class EffectClass(StrEnum):
    """safe: reads, forwarded as they come; external: done exactly once through the ledger;
    generation: LLM output, recorded and replayed, and retried when it failed."""

    SAFE = "safe"
    EXTERNAL = "external"
    GENERATION = "generation"


class OnMissingKey(StrEnum):
    """What an effect request without any key gets: refused, forwarded unprotected, or keyed by
    its content within ``content_window_s``."""

    REJECT = "reject"
    PASSTHROUGH = "passthrough"
    CONTENT = "content"


class ToolCallEffects(StrEnum):
    """How many effects one tool call makes on a route. ``one``: a request of the tool call
    without ``Idem-Step`` is keyed by the route, so a re-run the LLM worded anew cannot act a
    second time; ``many``: it is keyed by its request digest, so each distinct request acts."""

    ONE = "one"
    MANY = "many"


class AdapterName(StrEnum):
    """The upstream's own dedupe mechanism an adapter drives (SPEC section 5)."""

    NONE = "none"
    STRIPE = "stripe"
    DISCORD = "discord"
    BLUESKY = "bluesky"


@dataclass(frozen=True, slots=True)
class NativeWindow:
    """How long the upstream deduplicates a native key: the default we assume and the most it
    is known to keep. A re-send under the same key is only safe inside this window."""

    default_s: int
    max_s: int


# Stripe keeps idempotency keys at least 24 h; a default an hour short leaves room for clock
# skew. Discord checks an enforced nonce "in the past few minutes": we assume two and allow
# five. Bluesky needs no window: a record key is unique in the repository for good.
NATIVE_WINDOWS: dict[AdapterName, NativeWindow] = {
    AdapterName.STRIPE: NativeWindow(default_s=23 * 3600, max_s=24 * 3600),
    AdapterName.DISCORD: NativeWindow(default_s=120, max_s=300),
}


class CredentialIdentity(StrEnum):
    """Which identity a request's ``Authorization`` credential names, read so that a rotated
    credential of the same identity keeps its records: ``none`` (the credential tells no
    identity apart), ``stripe_mode`` (test or live, from the key's prefix), ``jwt_subject``
    (the ``sub`` claim of a JWT, e.g. a Bluesky DID), ``discord_bot`` (the bot's user id, the
    first segment of a bot token)."""

    NONE = "none"
    STRIPE_MODE = "stripe_mode"
    JWT_SUBJECT = "jwt_subject"
    DISCORD_BOT = "discord_bot"


HTTP_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
_POINTER = re.compile(r"^(/([^~/]|~[01])*)+$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token
# Their values are secrets, and a secret rotates: a scope is built from identities, never from
# credentials (a credential's identity is what ``credential`` reads).
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
_PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A literal, "{name}" after an optional literal prefix ("bot{token}"), or "{name*}".
_TEMPLATE_SEGMENT = re.compile(rf"^([^{{}}]*\{{{_PARAM_NAME}\}}|\{{{_PARAM_NAME}\*\}}|[^{{}}]*)$")


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RetryPolicy(Frozen):
    """Automatic retries, only ever applied to ``safe`` routes."""

    attempts: Annotated[int, Field(ge=1, le=10)] = 3
    base_delay_ms: Annotated[int, Field(ge=1, le=60_000)] = 100
    max_delay_ms: Annotated[int, Field(ge=1, le=300_000)] = 5_000
    statuses: tuple[int, ...] = (429, 502, 503, 504)
    honour_retry_after: bool = True


class Scope(Frozen):
    """Whose records a request reads and writes: the account headers the upstream acts on
    behalf of, and the identity its credential names. A stored answer is never replayed to a
    request of another scope; requests that carry none keep the keys they always had."""

    headers: tuple[str, ...] = ()
    credential: CredentialIdentity = CredentialIdentity.NONE

    @field_validator("headers")
    @classmethod
    def _account_headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen: set[str] = set()
        for name in value:
            lower = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if lower in _CREDENTIAL_HEADERS:
                raise ValueError(
                    f"{name} carries a secret that rotates, so it cannot scope records; set"
                    " 'credential' to the rule that reads the identity it names"
                )
            if lower.startswith("idem-"):
                raise ValueError(f"{name} is the proxy's own header; send Idem-Agent per tenant")
            if lower in seen:
                raise ValueError(f"header {name!r} is listed twice")
            seen.add(lower)
        return value


class Match(Frozen):
    """Which requests a route takes: HTTP methods and a path template.

    Templates are ``/``-separated; ``{name}`` matches one segment, ``prefix{name}`` one that
    starts with ``prefix``, ``{name*}`` (last segment only) matches the rest of the path, and
    ``*`` for methods matches any method.
    """

    methods: tuple[str, ...] = ("*",)
    path: str = "/{rest*}"

    @field_validator("methods", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        upper = tuple(method.upper() for method in value)
        unknown = [m for m in upper if m != "*" and m not in HTTP_METHODS]
        if unknown:
            raise ValueError(
                f"unknown HTTP method {unknown[0]!r}; use one of {sorted(HTTP_METHODS)} or '*'"
            )
        return upper

    @field_validator("path")
    @classmethod
    def _valid_template(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path template {value!r} must start with '/'")
        segments = value.split("/")[1:]
        names: set[str] = set()
        for index, segment in enumerate(segments):
            if not _TEMPLATE_SEGMENT.match(segment):
                raise ValueError(
                    f"path template segment {segment!r} is not a literal, '{{name}}',"
                    " 'prefix{name}' or '{name*}'"
                )
            if is_rest(segment) and index != len(segments) - 1:
                raise ValueError(f"'{segment}' may only stand as the last segment of {value!r}")
            if is_param(segment) or is_rest(segment):
                name = param_name(segment)
                if name in names:
                    raise ValueError(f"'{{{name}}}' appears twice in {value!r}; name each apart")
                names.add(name)
        return value


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

    @field_validator("volatile_fields")
    @classmethod
    def _pointers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pointer in value:
            _check_pointer(pointer)
        return value

    @field_validator("external_id")
    @classmethod
    def _external_id_pointer(cls, value: str | None) -> str | None:
        if value is not None:
            _check_pointer(value)
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
        return self

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


def _check_pointer(pointer: str) -> None:
    if not _POINTER.match(pointer):
        raise ValueError(
            f"{pointer!r} is not a JSON pointer (RFC 6901): write it like '/nonce' or"
            " '/record/createdAt'"
        )


class Policy(Frozen):
    """The routes of one upstream, tried in order; ``default`` takes what none matches."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=64)]
    description: str = ""
    adapter: AdapterName = AdapterName.NONE
    # How long the upstream deduplicates a native key; unset: the adapter's default.
    native_window_s: Annotated[int, Field(ge=1)] | None = None
    scope: Scope = Scope()
    routes: tuple[Route, ...] = ()
    default: Route

    @property
    def window_s(self) -> int | None:
        """The native dedupe window in force, or None where the adapter needs none."""
        window = NATIVE_WINDOWS.get(self.adapter)
        if window is None:
            return None
        return self.native_window_s or window.default_s

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        seen: set[str] = set()
        for route in (*self.routes, self.default):
            if route.name in seen:
                raise ValueError(f"route name {route.name!r} is used twice; names must differ")
            seen.add(route.name)
        return self

    @model_validator(mode="after")
    def _possible_window(self) -> Policy:
        if self.native_window_s is None:
            return self
        window = NATIVE_WINDOWS.get(self.adapter)
        if window is None:
            raise LocatedError(
                ("native_window_s",),
                f"adapter {self.adapter!s} has no dedupe window to set; remove native_window_s",
            )
        if self.native_window_s > window.max_s:
            raise LocatedError(
                ("native_window_s",),
                f"{self.adapter!s} keeps a native key for at most {window.max_s} s, so a re-send"
                f" after {self.native_window_s} s could act twice; set at most {window.max_s}",
            )
        return self

    @model_validator(mode="after")
    def _native_keys_have_an_adapter(self) -> Policy:
        for index, route in self._indexed_routes():
            if not route.native_key:
                continue
            where = ("routes", index, "native_key") if index >= 0 else ("default", "native_key")
            if self.adapter is AdapterName.NONE:
                raise LocatedError(
                    where,
                    f"route {route.name!r} asks for a native key but the policy has no adapter;"
                    " set 'adapter: stripe', 'discord' or 'bluesky', or remove native_key",
                )
            if route.match.methods != ("POST",):
                raise LocatedError(
                    where,
                    f"route {route.name!r}: {self.adapter!s} native keys go on POST requests"
                    " only; match 'methods: [POST]' or remove native_key",
                )
        return self

    @model_validator(mode="after")
    def _every_route_reachable(self) -> Policy:
        for later, route in enumerate(self.routes):
            for earlier, before in enumerate(self.routes[:later]):
                if methods_cover(before.match.methods, route.match.methods) and template_covers(
                    before.match.path, route.match.path
                ):
                    raise LocatedError(
                        ("routes", later, "match"),
                        f"route {route.name!r} can never match: route {before.name!r} above it"
                        f" (routes.{earlier}) takes every {'/'.join(route.match.methods)}"
                        f" {route.match.path} request first; move {route.name!r} above it or"
                        f" narrow {before.name!r}",
                    )
        return self

    def _indexed_routes(self) -> list[tuple[int, Route]]:
        return [*enumerate(self.routes), (-1, self.default)]


class LocatedError(ValueError):
    """A problem that spans fields, with the place in the document it is about."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
