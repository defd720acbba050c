"""The fake model (tests/support/fakes/planner.py) on loopback, for the frameworks to call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from idemproxy import agent
from tests.support.fakes.planner import PLANNER, Planner, build_planner_app
from tests.support.fakes.serving import BackgroundServers


@dataclass
class Model:
    url: str
    planner: Planner


@pytest.fixture
def model() -> Iterator[Model]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_planner_app()
        yield Model(servers.serve(app), app[PLANNER])
    finally:
        servers.stop()


class ToolHeaders:
    """A tool that notes the headers its HTTP calls would carry, instead of making them."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    def __call__(self, text: str) -> str:
        self.seen.append(agent.headers())
        return f"posted {text}"


def idem_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.lower().startswith("idem-")}
