"""The refusals of the flow that a record's state or a failure calls for (SPEC section 4).

Those for a key that belongs to another request are in conflicts.py.
"""

from __future__ import annotations

from urllib.parse import quote

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.proxy.forward import UpstreamFailure
from idemproxy.store.records import EffectRecord, Unreplicated


def store_unavailable() -> RequestRefused:
    return RequestRefused(
        ProblemCode.STORE_UNAVAILABLE,
        "the effect store is unreachable, so nothing was forwarded; retry shortly",
        retry_after_s=1,
    )


def store_not_replicated(unreplicated: Unreplicated) -> RequestRefused:
    return RequestRefused(
        ProblemCode.STORE_NOT_REPLICATED,
        f"the store's replicas did not confirm the claim ({unreplicated}), so a failover could"
        " lose it: nothing was forwarded and the key stays free; retry shortly",
        retry_after_s=1,
    )


def outcome_unknown(record: EffectRecord) -> RequestRefused:
    return RequestRefused(
        ProblemCode.OUTCOME_UNKNOWN,
        "an earlier attempt may have taken effect but no answer was recorded"
        f" ({record.reason or 'no reason recorded'}); it waits in the review queue and is not"
        " re-sent. An operator resolves it with `idemproxy review resolve`.",
        extra={"review": "/v1/review/" + quote(str(record.key), safe=""), "state": "unknown"},
    )


def upstream_failed(
    failure: UpstreamFailure, sent_detail: str = "", retry_after_s: int | None = None
) -> RequestRefused:
    """The refusal of a request the upstream did not answer: ``sent_detail`` says what became
    of a request that was sent (the upstream's failure alone by default)."""
    if not failure.sent:
        return RequestRefused(
            ProblemCode.UPSTREAM_UNREACHABLE,
            f"nothing was sent ({failure.reason}); retrying is safe",
        )
    code = ProblemCode.UPSTREAM_TIMEOUT if failure.timed_out else ProblemCode.UPSTREAM_DISCONNECTED
    detail = sent_detail or f"the upstream did not answer: {failure.reason}"
    return RequestRefused(code, detail, retry_after_s=retry_after_s)
