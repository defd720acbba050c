"""Waiting for Redis replicas to have a claim before it counts: the ``wait_*`` URL parameters.

::

    redis+sentinel://s1:26379,s2:26379/mymaster?wait_replicas=1&wait_timeout_ms=500

Redis replicates asynchronously: a master that acknowledged a claim and died before any
replica had it is replaced by a replica without the claim, and a repeat of the request is then
forwarded again. With ``wait_replicas=N`` each claim is followed, on its connection, by
``WAIT N wait_timeout_ms``; a claim fewer than N replicas confirmed in that time is reported
(:class:`~idemproxy.store.records.Unreplicated`) and the proxy sends nothing on it. With
``wait_aof=1`` the wait is ``WAITAOF 0 N wait_timeout_ms`` instead: the replicas have also
written the claim to their append-only file on disk (Redis 7.2 and later; an older server
answers that it has no such command, and every claim is refused with that answer).

The default is no wait (``wait_replicas=0``): a single Redis has no replica to wait for, and
how many replicas a deployment can wait for while one of them is down is for it to say.
Settles do not wait (docs/reliability.md says why). This module reads URLs only; the waiting
itself is :mod:`idemproxy.store.redis.wait`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from idemproxy.store.records import Unreplicated

WAIT_REPLICAS = "wait_replicas"
WAIT_TIMEOUT_MS = "wait_timeout_ms"
WAIT_AOF = "wait_aof"
PARAMETERS = (WAIT_REPLICAS, WAIT_TIMEOUT_MS, WAIT_AOF)
DEFAULT_TIMEOUT_MS = 500
# The store gives every Redis answer 2 s (redis_client.OPERATION_TIMEOUT_S), and a claim's
# answer comes only once its wait ends: a longer wait would be taken for a stuck server.
MAX_TIMEOUT_MS = 1000
MAX_REPLICAS = 100
_FLAGS = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False}
# Schemes whose deployments fail over to a replica.
FAILOVER_SCHEMES = ("redis+sentinel", "redis+cluster")


@dataclass(frozen=True, slots=True)
class ReplicaWait:
    """How many replicas must confirm each claim, and how long the proxy waits for them."""

    replicas: int
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    aof: bool = False

    def command(self) -> tuple[str | int, ...]:
        """The Redis command that waits, run after the claim on the claim's connection."""
        if self.aof:
            return ("WAITAOF", 0, self.replicas, self.timeout_ms)
        return ("WAIT", self.replicas, self.timeout_ms)

    def shortfall(self, reply: object) -> Unreplicated | None:
        """What ``reply`` (the wait's answer, or the error it raised) leaves missing, if
        anything. ``WAIT`` answers a count, ``WAITAOF`` the local and the replica count."""
        if isinstance(reply, BaseException):
            error = str(reply) or type(reply).__name__
            if self.aof and "unknown command" in error.lower():
                error += (
                    f"; {WAIT_AOF}=1 needs WAITAOF, which Redis has since 7.2: upgrade the"
                    f" server or drop {WAIT_AOF} from the store URL"
                )
            return Unreplicated(self.replicas, 0, self.timeout_ms, error=error)
        confirmed = reply[1] if self.aof and isinstance(reply, list) and len(reply) == 2 else reply
        if not isinstance(confirmed, int):
            return Unreplicated(self.replicas, 0, self.timeout_ms, error=f"answered {reply!r}")
        if confirmed >= self.replicas:
            return None
        return Unreplicated(self.replicas, confirmed, self.timeout_ms)


def split_wait(url: str) -> tuple[str, ReplicaWait | None]:
    """``url`` without its ``wait_*`` parameters, and the wait they ask for (None: no wait).

    Every other query parameter is left as it was. Raises ``ValueError`` saying what is wrong.
    """
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    kept: list[str] = []
    found: dict[str, str] = {}
    for item in query.split("&"):
        raw_name, _, raw_value = item.partition("=")
        name = unquote(raw_name)
        if not name.startswith("wait_"):
            kept.append(item)
            continue
        if name not in PARAMETERS:
            raise ValueError(f"{name} is no store parameter; the replica waits are {_listed()}")
        if name in found:
            raise ValueError(f"{name} is given twice; give it once")
        found[name] = unquote(raw_value)
    rest = base + ("?" + "&".join(kept) if kept else "")
    return rest, _wait(found)


def failover_may_lose_claims(url: str) -> bool:
    """Whether the URL names a deployment that fails over to replicas, without a wait."""
    scheme = url.partition("://")[0].lower()
    if scheme not in FAILOVER_SCHEMES:
        return False
    try:
        _, wait = split_wait(url)
    except ValueError:
        return False  # opening the store reports that
    return wait is None


def _wait(found: dict[str, str]) -> ReplicaWait | None:
    replicas = _number(found, WAIT_REPLICAS, 0, 0, MAX_REPLICAS, "replicas")
    timeout_ms = _number(
        found, WAIT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, 1, MAX_TIMEOUT_MS, "milliseconds"
    )
    aof = found.get(WAIT_AOF, "0").lower()
    if aof not in _FLAGS:
        raise ValueError(f"{WAIT_AOF} is 1 or 0 (yes/no, true/false), not {found[WAIT_AOF]!r}")
    if replicas == 0:
        if len(found) > (WAIT_REPLICAS in found):
            raise ValueError(
                f"{WAIT_TIMEOUT_MS} and {WAIT_AOF} apply only to a wait: add {WAIT_REPLICAS}=1"
                " (or more)"
            )
        return None
    return ReplicaWait(replicas, timeout_ms, _FLAGS[aof])


def _number(found: dict[str, str], name: str, default: int, low: int, high: int, unit: str) -> int:
    text = found.get(name)
    if text is None:
        return default
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"{name} is a whole number of {unit} from {low} to {high}, not {text!r}")
    return int(text)


def _listed() -> str:
    return ", ".join(PARAMETERS)
