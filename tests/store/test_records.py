"""The record model refuses values no backend could store sensibly."""

from __future__ import annotations

import pytest

from idemproxy.store.records import EventType, RecordState, Settlement, StoredResponse


def test_a_settlement_cannot_leave_a_record_in_flight() -> None:
    with pytest.raises(ValueError, match="in_flight"):
        Settlement(RecordState.IN_FLIGHT)


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        (RecordState.COMPLETED, 200, EventType.COMPLETED),
        (RecordState.COMPLETED, 399, EventType.COMPLETED),
        (RecordState.COMPLETED, 400, EventType.FAILED),
        (RecordState.UNKNOWN, 0, EventType.UNKNOWN),
        (RecordState.NOT_APPLIED, 429, EventType.NOT_APPLIED),
    ],
)
def test_a_settlement_names_its_event(state: RecordState, status: int, expected: EventType) -> None:
    response = StoredResponse(status, (), b"") if status else None
    assert Settlement(state, response).event_type() is expected
