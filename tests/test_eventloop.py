"""The loop ``idemproxy serve`` runs on: uvloop when installed, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from idemproxy import eventloop


async def running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_runs_on_uvloop_when_it_is_installed() -> None:
    assert isinstance(eventloop.run(running_loop()), uvloop.Loop)


def test_runs_on_asyncio_when_uvloop_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # makes `import uvloop` fail
    loop = eventloop.run(running_loop())
    assert isinstance(loop, asyncio.BaseEventLoop)
    assert not isinstance(loop, uvloop.Loop)
