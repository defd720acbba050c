"""The field names of the Redis store's hashes and streams: each names one thing on the wire."""

from __future__ import annotations

from enum import StrEnum

import pytest

from idemproxy.store.redis.fields import FIELDS


@pytest.mark.parametrize("group", sorted(FIELDS))
def test_no_two_members_of_a_group_share_a_name_on_the_wire(group: str) -> None:
    # A StrEnum member whose value repeats another's is silently an alias of it: two fields
    # the code tells apart would be one field in Redis.
    fields: type[StrEnum] = FIELDS[group]
    assert len(fields.__members__) == len(list(fields))


def test_every_group_the_scripts_name_has_fields() -> None:
    assert all(len(list(fields)) > 0 for fields in FIELDS.values())
    assert {"record", "event", "audit", "control", "cursor", "outcomes"} <= set(FIELDS)
