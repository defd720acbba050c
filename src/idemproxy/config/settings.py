"""The settings of a proxy process and the checks each value passes as it loads.

Models are frozen and refuse unknown keys; quantities carry their unit in the field name.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from yarl import URL

from idemproxy.policies.approval import ApprovalRule
from idemproxy.policies.loader import shipped_packs
from idemproxy.store.control import MAX_STREAK
from idemproxy.store.retention import (
    ARCHIVE_RETENTION_S,
    AUDIT_RETENTION_S,
    EVENT_RETENTION_S,
    Retention,
)

ENV_PREFIX = "IDEMPROXY_"


class ConsoleReach(StrEnum):
    """Who the operator console on the admin listener answers (admin/console/)."""

    LOOPBACK = "loopback"  # peers on loopback only: this host, or a `kubectl port-forward`
    ANY = "any"  # every peer that reaches the admin listener
    OFF = "off"  # no console


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class HostPort(BaseModel):
    model_config = ConfigDict(frozen=True)
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_host_port(value: object) -> object:
    if not isinstance(value, str):
        return value
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT; write it like 127.0.0.1:8080")
    return HostPort(host=host, port=int(port))


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UpstreamConfig(Frozen):
    url: str
    # A shipped pack name or a policy file; unset means the pack named like the upstream,
    # else ``generic``.
    policy: str | None = None
    connect_timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    # Longest silence allowed while reading a response: LLM streams may run for many minutes,
    # so there is deliberately no total timeout, only this idle one.
    read_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0
    max_connections: Annotated[int, Field(ge=1, le=10_000)] = 100
    # Route name -> when its effects wait for an operator's approval (docs/approvals.md).
    approvals: dict[str, ApprovalRule] = {}

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        url = URL(value)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"{value!r} is not an http(s) URL; write it like https://api.x.com")
        if url.query_string or url.fragment:
            raise ValueError(f"{value!r} must have no query or fragment")
        return str(url).rstrip("/")


UpstreamName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]

MIN_SECRET_CHARS = 16


class ControllerConfig(Frozen):
    """The recovery controller's webhook (SPEC 6); without a ``url`` nothing is delivered."""

    url: str | None = None
    secret: SecretStr | None = Field(default=None, validate_default=True)
    attempts: Annotated[int, Field(ge=1, le=1000)] = 20
    backoff_s: Annotated[float, Field(gt=0, le=3600)] = 0.5
    max_backoff_s: Annotated[float, Field(gt=0, le=86_400)] = 60.0
    timeout_s: Annotated[float, Field(gt=0, le=300)] = 10.0
    batch_size: Annotated[int, Field(ge=1, le=1000)] = 100
    poll_interval_s: Annotated[float, Field(gt=0, le=60)] = 1.0

    @field_validator("url")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            url = URL(value)
            port = url.port
        except ValueError:
            url, port = URL(), None
        host = url.host or ""
        if url.scheme not in ("http", "https") or not host or port is None or url.fragment:
            raise ValueError(
                f"{value!r} is not a webhook URL; write it like https://controller.internal/events"
            )
        if any(char.isspace() for char in host):
            raise ValueError(f"{value!r} has a space in its host name; fix the URL")
        return str(url)

    @field_validator("secret")
    @classmethod
    def _signing_secret(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None:
            if info.data.get("url"):
                raise ValueError(
                    "controller.url is set, so deliveries must be signed: set controller.secret"
                    f" (or {ENV_PREFIX}CONTROLLER__SECRET) to at least {MIN_SECRET_CHARS}"
                    " random characters, e.g. the output of `openssl rand -hex 32`"
                )
            return None
        secret = value.get_secret_value()
        if len(secret) < MIN_SECRET_CHARS or not secret.isprintable() or " " in secret:
            raise ValueError(
                f"the webhook secret must be at least {MIN_SECRET_CHARS} printable characters"
                " without spaces; generate one with `openssl rand -hex 32`"
            )
        return value


class RecoveryConfig(Frozen):
    """The review queue's housekeeping and the limit on operators' recovery actions."""

    # How often in-flight records whose lease lapsed are turned unknown (and counted).
    sweep_interval_s: Annotated[float, Field(gt=0, le=3600)] = 5.0
    actions_per_minute: Annotated[int, Field(ge=1, le=10_000)] = 60
    # Consecutive failed effects (an error status, unknown or not applied) that pause an agent
    # until an operator resumes it; 0 never pauses.
    pause_after_failures: Annotated[int, Field(ge=0, le=MAX_STREAK)] = 5


HOUR_S = 3600
DAY_S = 86_400
MAX_RETENTION_S = 10 * 365 * DAY_S  # a store is not an archive for decades


class RetentionConfig(Frozen):
    """How long the store keeps what is not an effect record (store/retention.py).

    ``archive_s`` covers the archives of abandoned batches and every batch's archive of
    outcomes, which answers ``batch-status`` once the records expired; it and ``audit_s`` must
    outlive the longest route ``ttl_s`` (the loader checks, knowing the routes).
    """

    events_s: Annotated[int, Field(ge=HOUR_S, le=MAX_RETENTION_S)] = EVENT_RETENTION_S
    audit_s: Annotated[int, Field(ge=HOUR_S, le=MAX_RETENTION_S)] = AUDIT_RETENTION_S
    archive_s: Annotated[int, Field(ge=HOUR_S, le=MAX_RETENTION_S)] = ARCHIVE_RETENTION_S

    def figures(self) -> Retention:
        return Retention(events_s=self.events_s, audit_s=self.audit_s, archive_s=self.archive_s)


class StoreSafetyConfig(Frozen):
    """What the proxy asks of its store beyond answering: that it cannot silently lose records
    (docs/reliability.md, "A store that loses records")."""

    # A store that keeps nothing across a restart (Redis without appendonly, memory://) is then
    # not ready and effects fail closed, instead of only being warned about: the dev Redis of
    # a laptop keeps nothing on disk, a production one must.
    require_persistence: bool = False
    # Serve on a store that may evict records (a maxmemory-policy other than noeviction, or one
    # that cannot be read), accepting that a repeat of an evicted effect is sent again.
    allow_eviction: bool = False
    # How often the store is checked between start-up and readiness probes.
    check_interval_s: Annotated[float, Field(gt=0, le=3600)] = 2.0


_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]{0,251}[a-z0-9_])?")


class ProxyConfig(Frozen):
    listen: HostPort = HostPort(host="127.0.0.1", port=8080)
    admin_listen: HostPort = HostPort(host="127.0.0.1", port=9090)
    agent_id: Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,255}$")] = "default"
    allow_agent_header: bool = True
    store: str = "sqlite:///idemproxy.db"
    admin_token: SecretStr | None = None
    # Names the admin API may be addressed by besides localhost, IP addresses and admin_listen's
    # own host: any other Host is refused, which stops DNS rebinding (admin/forgery.py).
    admin_hosts: tuple[str, ...] = ()
    # Where the operator console (/console/ on admin_listen) answers; it signs in with
    # admin_token and offers nothing without one.
    console: ConsoleReach = ConsoleReach.LOOPBACK
    log_level: LogLevel = LogLevel.INFO
    shutdown_timeout_s: Annotated[float, Field(ge=0, le=3600)] = 20.0
    # Longest an agent may take to accept one write of its answer before it counts as gone.
    agent_write_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    # Proxy processes sharing the listener (SO_REUSEPORT); one event loop uses one core.
    workers: Annotated[int, Field(ge=1, le=64)] = 1
    upstreams: dict[UpstreamName, UpstreamConfig] = {}
    controller: ControllerConfig = ControllerConfig()
    recovery: RecoveryConfig = RecoveryConfig()
    store_safety: StoreSafetyConfig = StoreSafetyConfig()
    retention: RetentionConfig = RetentionConfig()

    _host_port = field_validator("listen", "admin_listen", mode="before")(parse_host_port)

    @field_validator("console", mode="before")
    @classmethod
    def _bare_off(cls, value: object) -> object:
        # YAML reads a bare `console: off` as false.
        return ConsoleReach.OFF.value if value is False else value

    @field_validator("admin_hosts", mode="before")
    @classmethod
    def _host_names(cls, value: object) -> object:
        if isinstance(value, str):  # IDEMPROXY_ADMIN_HOSTS=name,name; empty: none
            value = [part for part in value.split(",") if part.strip()]
        if not isinstance(value, list | tuple):
            return value
        names = []
        for entry in value:
            name = str(entry).strip().lower().rstrip(".")
            if not _HOST_NAME.fullmatch(name):
                raise ValueError(
                    f"{str(entry).strip()!r} is not a host name; list names alone, without"
                    " scheme or port, like idemproxy-admin.tools.svc"
                )
            names.append(name)
        return tuple(names)

    @field_validator("admin_token")
    @classmethod
    def _sendable_token(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty variable (a Secret key that is missing) must not count as a token; nor can
        # a client send blanks at either end, since HTTP strips them from header values.
        token = value.get_secret_value() if value is not None else None
        if token is not None and (not token or token != token.strip()):
            raise ValueError(
                "the admin token is empty or starts or ends with blanks; set it to a random"
                " secret, e.g. the output of `openssl rand -hex 32`"
            )
        return value

    def policy_ref(self, upstream: str) -> str:
        configured = self.upstreams[upstream].policy
        if configured:
            return configured
        return upstream if upstream in shipped_packs() else "generic"
