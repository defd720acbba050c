"""A labelled metric's children, each looked up once, for the request path."""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client import Counter, Histogram

M = TypeVar("M", Counter, Histogram)


class Children(Generic[M]):
    """A labelled metric's children, each looked up once.

    ``labels()`` takes a lock and checks its arguments on every call; on the request path the
    label sets are few (upstream x route x outcome), so each child is kept after its first use.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child
