"""Verbs on a store without a proxy: the proxy's rate limit, and a sweep of lapsed leases."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from idemproxy.cli import main
from idemproxy.store.factory import open_store
from idemproxy.store.records import ClaimRequest, EffectMeta, RecordKey, RecordState
from tests.cli.filled import AGENT


def pause_and_resume(store_url: str, *extra: str) -> list[int]:
    base = ["--store", store_url, "--note", "n", *extra]
    return [main(["agent", "pause", AGENT, *base]), main(["agent", "resume", AGENT, *base])]


def test_the_environment_s_rate_limit_applies_to_store_commands(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("IDEMPROXY_RECOVERY__ACTIONS_PER_MINUTE", "1")
    monkeypatch.setenv("IDEMPROXY_ADMIN_URL", "http://127.0.0.1:9")  # the CLI's, no setting

    assert pause_and_resume(store_url) == [0, 1]
    assert "limit (recovery.actions_per_minute)" in capsys.readouterr().err


def test_the_config_file_s_rate_limit_applies_to_store_commands(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text("recovery: {actions_per_minute: 1}\n")

    assert pause_and_resume(store_url, "--config", str(config)) == [0, 1]
    assert "had 1 recovery actions in the last minute" in capsys.readouterr().err


def test_without_a_config_the_default_limit_applies(store_url: str) -> None:
    assert pause_and_resume(store_url) == [0, 0]


def test_config_is_refused_with_a_running_proxy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text("recovery: {actions_per_minute: 1}\n")

    assert main(["status", "--config", str(config)]) == 2
    assert "--config is for --store" in capsys.readouterr().err


async def _claim_with_a_short_lease(path: Path) -> RecordKey:
    store = open_store(f"sqlite:///{path}", create=False)
    key = RecordKey(AGENT, "tc:batch-9:call-1:d-0")
    meta = EffectMeta("batch-9", "call-1", "post_message", "discord", "POST", "/channels/1")
    await store.claim(ClaimRequest(key, "fp", meta, lease_ms=50, ttl_s=600))
    await store.close()
    await asyncio.sleep(0.1)
    return key


def test_store_sweep_turns_a_lapsed_lease_unknown_and_audits_it(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = asyncio.run(_claim_with_a_short_lease(tmp_path / "effects.db"))

    assert main(["store", "sweep", "--store", store_url, "--actor", "ops@host", "--json"]) == 0
    document = orjson.loads(capsys.readouterr().out)

    assert document["swept"] == [
        {"effect_key": str(key), "batch": "batch-9", "tool_call": "call-1"}
    ]

    async def read() -> tuple[RecordState | None, list[str]]:
        store = open_store(store_url, create=False)
        record = await store.get(key)
        entries = [f"{e.action} {e.target} {e.note}" for e in await store.read_audit(AGENT)]
        await store.close()
        return (record.state if record else None), entries

    state, entries = asyncio.run(read())
    assert state is RecordState.UNKNOWN
    assert any(e.startswith(f"effect.lapsed {key} ") and "ops@host" in e for e in entries)
    assert main(["store", "sweep", "--store", store_url]) == 0
    assert "no lease has lapsed" in capsys.readouterr().out


def test_store_sweep_needs_a_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "sweep"]) == 2
    assert "a running proxy sweeps its own" in capsys.readouterr().err


def test_the_config_file_s_retention_applies_to_store_commands(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What --store reports (and an abandon it writes keeps) follows the proxy's retention.
    config = tmp_path / "idemproxy.yaml"
    config.write_text("retention: {events_s: 7200, audit_s: 7776000, archive_s: 7776000}\n")

    main(["status", "--store", store_url, "--config", str(config), "--json"])
    assert orjson.loads(capsys.readouterr().out)["retention"]["events_s"] == 7200
