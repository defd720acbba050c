"""What an upstream answer settles: the record keeps the answer as sent, its id read decoded."""

from __future__ import annotations

import gzip

from idemproxy.effects.status import settlement_for
from idemproxy.policies.route import Route
from idemproxy.proxy.relay import Relayed
from idemproxy.store.records import RecordState

ROUTE = Route(name="create_message", external_id="/id")
GZIPPED = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
ANSWER = gzip.compress(b'{"id": "1200000000000000001", "content": "hi"}')


def test_a_gzipped_answer_is_kept_as_sent_and_its_id_read_decoded() -> None:
    relayed = Relayed(ANSWER, truncated=False, complete=True, client_gone=False)

    settled = settlement_for(RecordState.COMPLETED, 200, GZIPPED, relayed, ROUTE)

    assert settled.external_id == "1200000000000000001"
    assert settled.response is not None
    assert (settled.response.body, settled.response.headers) == (ANSWER, GZIPPED)


def test_a_gzipped_answer_recorded_only_in_part_completes_without_an_id() -> None:
    relayed = Relayed(ANSWER[:20], truncated=True, complete=True, client_gone=False)

    settled = settlement_for(RecordState.COMPLETED, 200, GZIPPED, relayed, ROUTE)

    assert (settled.state, settled.external_id) == (RecordState.COMPLETED, "")
    assert settled.response is not None
    assert settled.response.body_truncated


def test_a_gzipped_answer_past_the_recorded_size_decoded_gives_no_id() -> None:
    # A small compressed body may expand far: it is read no further than it would be kept.
    bomb = gzip.compress(b'{"id": "1", "pad": "' + b" " * 4096 + b'"}')
    relayed = Relayed(bomb, truncated=False, complete=True, client_gone=False)
    route = Route(name="create_message", external_id="/id", max_recorded_bytes=1024)

    settled = settlement_for(RecordState.COMPLETED, 200, GZIPPED, relayed, route)

    assert settled.external_id == ""
