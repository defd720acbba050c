"""Marking an effect that a compensation undid, so that nothing replays it as done.

Once the compensation of an effect completed, its record is resolved from ``completed`` to
``completed`` again (compare-and-set on its fence) with a new recorded answer: ``409
effect-compensated``, naming the compensation in the body and in the ``Idem-Compensated-By``
header. That header is the mark: batch progress lists the effect as ``compensated``, a repeat
of it gets the 409 instead of the "posted" it once got, and it is kept by every store backend
like any recorded answer. The original answer's external id stays on the record.

The mark is a second step after the compensation's own settle: a proxy that stops between the
two leaves the effect unmarked, and the next compensation run (which replays the compensation
as undone) marks it then.
"""

from __future__ import annotations

from idemproxy.errors import ProblemCode
from idemproxy.ledger.audit import AuditAction
from idemproxy.ledger.review import RESOLVED_TTL_S
from idemproxy.proxy.problems import PROBLEM_CONTENT_TYPE, problem_response
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    EffectRecord,
    RecordState,
    Resolution,
    Resolved,
    ResolveRequest,
    StoredResponse,
)

COMPENSATED_BY = "idem-compensated-by"


def compensated_by(record: EffectRecord) -> str:
    """The key of the compensation that undid ``record``; "" when none did."""
    if record.state is not RecordState.COMPLETED or record.response is None:
        return ""
    for name, value in record.response.headers:
        if name.lower() == COMPENSATED_BY:
            return value
    return ""


def compensated_answer(record: EffectRecord, compensation_key: str) -> StoredResponse:
    """What a repeat of ``record`` gets once ``compensation_key`` undid it."""
    answer = problem_response(
        ProblemCode.EFFECT_COMPENSATED,
        f"this effect was undone by its compensation {compensation_key}, so it is neither"
        " replayed as done nor sent again. To do it again, an operator restarts the batch"
        f" (`idemproxy recover {record.key.agent} {record.meta.batch} --strategy restart`)",
        effect_key=str(record.key),
        extra={
            "state": "compensated",
            "compensation_key": compensation_key,
            "external_id": record.external_id,
        },
    )
    assert isinstance(answer.body, bytes)
    # A replay adds Idem-Outcome, Idem-Key and the retry headers itself (effects/answers.py).
    headers = (("Content-Type", PROBLEM_CONTENT_TYPE), (COMPENSATED_BY, compensation_key))
    return StoredResponse(answer.status, headers, answer.body)


async def mark_compensated(
    store: Store, record: EffectRecord, compensation_key: str, actor: str
) -> bool:
    """Mark ``record`` undone by ``compensation_key``; False if it moved on or is marked."""
    if compensated_by(record) or record.state is not RecordState.COMPLETED:
        return False
    resolution = Resolution(
        RecordState.COMPLETED,
        response=compensated_answer(record, compensation_key),
        external_id=record.external_id,
        reason=f"compensated by {compensation_key}",
        ttl_s=RESOLVED_TTL_S,
    )
    status = record.status
    audit = AuditEntry(
        agent=record.key.agent,
        action=AuditAction.MARK_COMPENSATED,
        actor=actor,
        target=str(record.key),
        before=f"completed ({status})",
        after=f"compensated by {compensation_key}",
    )
    result = await store.resolve(
        ResolveRequest(record.key, RecordState.COMPLETED, resolution, audit, record.fence)
    )
    return isinstance(result, Resolved)
