"""Automatic retries for ``safe`` routes: bounded, exponential backoff with full jitter.

Only reads and other idempotent calls get here (the policy model refuses ``retry`` on any other
route), so sending one again can never act twice. A ``Retry-After`` the upstream sends is obeyed
when it fits within the route's ``max_delay_ms``; one that asks for longer ends the retries and
the agent gets the upstream's answer, ``Retry-After`` included, to decide for itself.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from aiohttp import ClientResponse, ClientSession, ClientTimeout, StreamReader
from multidict import CIMultiDict
from yarl import URL

from idemproxy.policies.route import RetryPolicy
from idemproxy.proxy.forward import Exchange, UpstreamFailure


def backoff_s(policy: RetryPolicy, retry: int, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(max delay, base * 2^(retry - 1))] for the n-th retry."""
    ceiling_ms = min(policy.max_delay_ms, policy.base_delay_ms * 2 ** (retry - 1))
    return rng.uniform(0, ceiling_ms) / 1000


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delay-seconds or an HTTP-date; None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def delay_before_retry_s(
    policy: RetryPolicy, retry: int, status: int, retry_after: str | None, rng: random.Random
) -> float | None:
    """How long to wait before retry number ``retry`` after ``status``; None: do not retry."""
    if status not in policy.statuses:
        return None
    asked_s = retry_after_s(retry_after) if policy.honour_retry_after else None
    if asked_s is None:
        return backoff_s(policy, retry, rng)
    return asked_s if asked_s * 1000 <= policy.max_delay_ms else None


def exchange_retried(
    session: ClientSession,
    method: str,
    url: URL,
    headers: CIMultiDict[str],
    body: bytes | StreamReader | None,
    client_timeout: ClientTimeout,
    policy: RetryPolicy | None,
    rng: random.Random | None = None,
) -> AbstractAsyncContextManager[ClientResponse]:
    """Like :class:`~idemproxy.proxy.forward.Exchange`, retried per ``policy`` (None: once).

    Yields the first answer that is not retried; raises the last :class:`UpstreamFailure` when
    every attempt failed without one. A streamed body can be sent only once, so it never is
    retried: read it into bytes first.
    """
    if policy is None or isinstance(body, StreamReader):
        # The one exchange itself: no generator around it for the requests that never retry.
        return Exchange(session, method, url, headers, body, client_timeout)
    return _retried(session, method, url, headers, body, client_timeout, policy, rng)


@asynccontextmanager
async def _retried(
    session: ClientSession,
    method: str,
    url: URL,
    headers: CIMultiDict[str],
    body: bytes | None,
    client_timeout: ClientTimeout,
    policy: RetryPolicy,
    rng: random.Random | None,
) -> AsyncIterator[ClientResponse]:
    rng = rng or random.Random()
    for attempt in range(1, policy.attempts + 1):
        last = attempt == policy.attempts
        async with AsyncExitStack() as stack:
            try:
                answer = await stack.enter_async_context(
                    Exchange(session, method, url, headers, body, client_timeout)
                )
            except UpstreamFailure:
                if last:
                    raise
                delay_s = backoff_s(policy, attempt, rng)
            else:
                retry_after = answer.headers.get("Retry-After")
                delay = None if last else delay_before_retry_s(
                    policy, attempt, answer.status, retry_after, rng
                )  # fmt: skip
                if delay is None:
                    yield answer
                    return
                delay_s = delay
                await answer.read()  # drain it, so the connection goes back to the pool
        await asyncio.sleep(delay_s)
