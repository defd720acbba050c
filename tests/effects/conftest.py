"""The in-process proxy of tests/proxy, in front of the same fake upstream."""

from __future__ import annotations

from tests.proxy.conftest import effects, make_proxy, upstream

__all__ = ["effects", "make_proxy", "upstream"]
