"""What an upstream adapter decides, as values the proxy acts on.

An adapter never talks to the network itself: it rewrites an outgoing request so it carries the
upstream's own dedupe key, says how an ``unknown`` outcome can be reconciled (re-send under the same
key, read the effect back, or leave it for review) and reads the answer of a read-back. The
proxy does the sending. The base class is the ``none`` adapter: no native key, review only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from idemproxy.policies.kinds import AdapterName

JSON_CONTENT_TYPE = "application/json"


class Plan(StrEnum):
    """How an ``unknown`` outcome of a native-key request can be reconciled without a human."""

    RESEND = "resend"  # the upstream still dedupes the native key: sending again is safe
    READ_BACK = "read_back"  # ask the upstream whether the effect exists
    REVIEW = "review"  # nothing proves either way: an operator decides


class Found(StrEnum):
    PRESENT = "present"
    ABSENT = "absent"
    UNSURE = "unsure"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of an effect, as its adapter sees it."""

    path: str  # below the upstream: /xrpc/com.atproto.repo.createRecord
    effect_key: str
    body: bytes  # as the agent sent it
    content_type: str
    # When the effect's first attempt was claimed, by the store's clock: the same for every
    # attempt of one effect, so a native key cut from it is too.
    first_attempt_ms: int
    # The route's volatile fields: what a repeat of the effect may word anew (a timestamp).
    volatile_fields: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        return method_of(self.path)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """The request as the upstream gets it; ``native`` says whether it carries a native key."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    native: bool = False


@dataclass(frozen=True, slots=True)
class ReadBack:
    """A read that tells whether an effect exists: ``GET`` of ``path_qs`` below the upstream."""

    path_qs: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The upstream's answer to one read-back."""

    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Finding:
    """What a read-back found; for ``PRESENT`` the JSON answer a repeat of the effect replays.

    ``ABSENT`` means the effect did not happen: the key may be sent again. ``detail`` says why,
    for the record's reason and the log.
    """

    found: Found
    body: bytes = b""
    external_id: str = ""
    detail: str = ""


def method_of(path: str) -> str:
    """A path's last segment: an XRPC method's name, a REST collection."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def is_json(content_type: str) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == JSON_CONTENT_TYPE or media_type.endswith("+json")


def key_digest(effect_key: str) -> bytes:
    """The bytes every native key is cut from: stable for one effect key, across processes."""
    return hashlib.sha256(b"idemproxy native key\0" + effect_key.encode()).digest()


class Adapter:
    """The ``none`` adapter, and the defaults every other adapter overrides."""

    name = AdapterName.NONE

    def __init__(self, window_s: int | None = None) -> None:
        self.window_s = window_s

    def outgoing(self, attempt: Attempt) -> Outgoing:
        """The request to send: the same bytes for every attempt of one effect."""
        return Outgoing(attempt.body)

    def plan(self, path: str, age_ms: int) -> Plan:
        """How an unknown outcome of a request to ``path`` whose first attempt is ``age_ms``
        old may be reconciled."""
        return Plan.REVIEW

    def within_window(self, age_ms: int) -> bool:
        """True while the upstream still dedupes a native key first sent ``age_ms`` ago."""
        return self.window_s is not None and age_ms < self.window_s * 1000

    def read_back(self, attempt: Attempt, sent: Outgoing) -> tuple[ReadBack, ...]:
        """The reads that show whether ``sent`` took effect; none: it cannot be read back."""
        return ()

    def finding(self, attempt: Attempt, sent: Outgoing, answers: Sequence[Answer]) -> Finding:
        """What the answers to :meth:`read_back`'s reads, in order, say about the effect."""
        return Finding(Found.UNSURE)

    def reconciles_answer(self, path: str, status: int) -> bool:
        """True when an answer with ``status`` to a native-key request to ``path`` calls for a
        read-back."""
        return False

    def rewrites_session(self, path: str) -> bool:
        """True when the response to ``path`` names an endpoint the client would switch to."""
        return False

    def rewrite_session(self, body: bytes, proxy_base_url: str) -> bytes:
        """The response with the endpoints it names pointed back at the proxy."""
        return body
