"""Children: a labelled metric's child is looked up once and then reused."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from idemproxy.metricchildren import Children


def test_each_label_set_is_looked_up_once_and_counts_into_its_series() -> None:
    registry = CollectorRegistry()
    counter = Counter("things", "Things.", ["kind"], registry=registry)
    children = Children(counter)
    assert children("a") is children("a")
    assert children("a") is not children("b")
    children("a").inc()
    children("a").inc()
    assert registry.get_sample_value("things_total", {"kind": "a"}) == 2
    assert registry.get_sample_value("things_total", {"kind": "b"}) == 0
