"""Configuration layering and the errors a user sees for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from idemproxy.cli import main
from idemproxy.config.loader import load_config
from idemproxy.errors import ConfigError
from idemproxy.store.retention import Retention
from tests.support.cli import idemproxy


def test_layers_flags_over_environment_over_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "listen: 127.0.0.1:7000\nagent_id: from-file\nstore: memory://\n"
        "upstreams:\n  discord: {url: 'https://discord.example/api/'}\n"
    )
    loaded = load_config(
        path,
        environ={
            "IDEMPROXY_AGENT_ID": "from-env",
            "IDEMPROXY_UPSTREAMS__DISCORD__READ_TIMEOUT_S": "9",
        },
        flags={"listen": "127.0.0.1:7001"},
    )
    config = loaded.config
    assert str(config.listen) == "127.0.0.1:7001"
    assert config.agent_id == "from-env"
    assert config.upstreams["discord"].url == "https://discord.example/api"
    assert config.upstreams["discord"].read_timeout_s == 9
    # No pack named like the upstream yet ships for every name: generic is the fallback.
    assert loaded.policies["discord"].name in {"discord", "generic"}


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({"IDEMPROXY_LISTN": "x"}, ["listn", "IDEMPROXY_LISTN", "unknown setting"]),
        ({"IDEMPROXY_UPSTREAMS__UP__URL": "ftp://x"}, ["upstreams.up.url", "http(s)"]),
        ({"IDEMPROXY_LISTEN": "8080"}, ["listen", "HOST:PORT"]),
        ({"IDEMPROXY_SHUTDOWN_TIMEOUT_S": "soon"}, ["shutdown_timeout_s"]),
        ({"IDEMPROXY_ADMIN_LISTEN": "0.0.0.0:9090"}, ["IDEMPROXY_ADMIN_TOKEN"]),
        (
            {"IDEMPROXY_STORE_SAFETY__REQUIRE_PERSISTENCE": "maybe"},
            ["store_safety.require_persistence", "IDEMPROXY_STORE_SAFETY__REQUIRE_PERSISTENCE"],
        ),
        ({"IDEMPROXY_STORE_SAFETY__CHECK_INTERVAL_S": "0"}, ["store_safety.check_interval_s"]),
    ],
)
def test_bad_settings_name_their_source_field_and_fix(
    environ: dict[str, str], names: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(environ=environ)
    for name in names:
        assert name in str(error.value)


def test_bad_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("upstreams:\n  up: {url: 'http://x', polcy: generic}\n")
    with pytest.raises(ConfigError) as error:
        load_config(path, environ={})
    assert str(path) in str(error.value)
    assert "upstreams.up.polcy" in str(error.value)


def test_cli_exits_2_with_one_paragraph_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("listen: [not, a, string]\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("idemproxy: ")
    assert "Traceback" not in err
    assert str(path) in err


def test_check_config_accepts_a_good_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "good.yaml"
    path.write_text("upstreams:\n  up: {url: 'http://127.0.0.1:1', policy: generic}\n")
    assert main(["check-config", str(path)]) == 0
    assert "OK" in capsys.readouterr().out


def test_unknown_policy_is_a_config_error() -> None:
    flags = {"upstreams.up.url": "http://x", "upstreams.up.policy": "nope"}
    with pytest.raises(ConfigError) as error:
        load_config(environ={}, flags=flags)
    assert "upstream 'up'" in str(error.value)
    assert "generic" in str(error.value)


def test_kubernetes_service_links_are_not_settings() -> None:
    environ = {
        "IDEMPROXY_SERVICE_HOST": "10.0.0.7",
        "IDEMPROXY_SERVICE_PORT": "9090",
        "IDEMPROXY_SERVICE_PORT_ADMIN": "9090",
        "IDEMPROXY_PORT": "tcp://10.0.0.7:9090",
        "IDEMPROXY_PORT_9090_TCP_ADDR": "10.0.0.7",
        "IDEMPROXY_AGENT_ID": "a1",
    }
    assert load_config(environ=environ).config.agent_id == "a1"


def test_the_operator_commands_admin_url_is_no_setting() -> None:
    """The README has operators export IDEMPROXY_ADMIN_URL for the commands; a shell that did
    must still be able to run serve and check-config."""
    environ = {"IDEMPROXY_ADMIN_URL": "http://127.0.0.1:9090", "IDEMPROXY_AGENT_ID": "a1"}
    assert load_config(environ=environ).config.agent_id == "a1"


def test_a_route_ttl_below_the_upstream_read_timeout_is_refused(tmp_path: Path) -> None:
    # A record must outlive the longest answer: a repeat sent once the first attempt gave up
    # waiting would otherwise find no record and be forwarded again.
    policy = tmp_path / "short.yaml"
    policy.write_text("name: short\nroutes: []\ndefault: {name: write, ttl_s: 60}\n")
    flags = {
        "upstreams.up.url": "http://127.0.0.1:1",
        "upstreams.up.policy": str(policy),
        "upstreams.up.read_timeout_s": 120,
    }
    with pytest.raises(ConfigError) as error:
        load_config(environ={}, flags=flags)
    message = str(error.value)
    for words in ("upstream 'up'", "route 'write'", "ttl_s 60", "read_timeout_s 120"):
        assert words in message
    flags["upstreams.up.read_timeout_s"] = 60
    assert load_config(environ={}, flags=flags).policies["up"].default.ttl_s == 60


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ["has no settings", "it is empty or all comments"]),
        ("# upstreams:\n#   discord: {url: https://discord.com/api}\n", ["has no settings"]),
    ],
    ids=["empty", "comments"],
)
def test_a_config_file_without_settings_is_refused(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path, environ={})
    assert str(path) in str(error.value)
    for word in words:
        assert word in str(error.value)


def test_check_config_refuses_an_empty_file_and_warns_of_no_upstreams(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    no_upstreams = tmp_path / "quiet.yaml"
    no_upstreams.write_text("log_level: debug\n")

    refused = idemproxy("check-config", str(empty))
    warned = idemproxy("check-config", str(no_upstreams))

    assert refused.returncode == 2
    assert refused.stderr.startswith(f"idemproxy: config file {empty} has no settings")
    assert "OK" not in refused.stdout
    assert warned.returncode == 0, warned.stderr
    assert warned.stdout.splitlines() == [
        "warning: no upstreams are configured, so every request would be answered 404"
        " unknown-upstream; add them under upstreams: (docs/configuration.md)",
        f"{no_upstreams}: OK",
    ]


def test_check_config_suggests_upstreams_for_upstream(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("upstream:\n  discord: {url: 'https://discord.com/api'}\n")
    ran = idemproxy("check-config", str(path))
    assert ran.returncode == 2
    assert "did you mean `upstreams`?" in ran.stderr


def test_retention_comes_from_its_section_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "proxy.yaml"
    config.write_text("retention: {events_s: 7200, audit_s: 864000}\nlog_level: info\n")
    environ = {"IDEMPROXY_RETENTION__ARCHIVE_S": "1728000"}
    retention = load_config(config, environ=environ).config.retention.figures()
    assert (retention.events_s, retention.audit_s, retention.archive_s) == (7200, 864000, 1728000)
    assert load_config(environ={}).config.retention.figures() == Retention()


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({"IDEMPROXY_RETENTION__EVENTS_S": "60"}, ["retention.events_s", "at least 3600"]),
        ({"IDEMPROXY_RETENTION__ARCHIVE_S": "a week"}, ["retention.archive_s", "whole number"]),
        ({"IDEMPROXY_RETENTION__AUDIT_S": str(400 * 365 * 86_400)}, ["retention.audit_s"]),
        ({"IDEMPROXY_RETENTION__ARCHIVES_S": "3600"}, ["archive_s", "unknown setting"]),
    ],
)
def test_bad_retention_is_refused_with_its_bounds(
    environ: dict[str, str], names: list[str]
) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(environ=environ)
    for name in names:
        assert name in str(error.value)


@pytest.mark.parametrize("setting", ["archive_s", "audit_s"])
def test_an_archive_or_audit_kept_shorter_than_the_records_is_refused(
    tmp_path: Path, setting: str
) -> None:
    policy = tmp_path / "long.yaml"
    policy.write_text("name: long\nroutes: []\ndefault: {name: write, ttl_s: 172800}\n")
    flags = {"upstreams.up.url": "http://127.0.0.1:1", "upstreams.up.policy": str(policy)}
    environ = {f"IDEMPROXY_RETENTION__{setting.upper()}": "86400"}
    with pytest.raises(ConfigError) as error:
        load_config(environ=environ, flags=flags)
    message = str(error.value)
    for words in (
        f"retention.{setting} 86400",
        "ttl_s 172800",
        "route 'write' of upstream 'up'",
        f"IDEMPROXY_RETENTION__{setting.upper()}) to at least 172800",
    ):
        assert words in message
    environ[f"IDEMPROXY_RETENTION__{setting.upper()}"] = "172800"
    assert load_config(environ=environ, flags=flags).config.retention.archive_s >= 172800


def test_an_upstream_s_approvals_go_on_the_routes_of_its_policy(tmp_path: Path) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text(
        "upstreams:\n"
        "  stripe:\n"
        "    url: https://api.stripe.com\n"
        "    approvals:\n"
        "      create_charge: {when: [{field: /amount, above: 10000}], approval_ttl_s: 300}\n"
    )
    policy = load_config(config, environ={}).policies["stripe"]
    [charge] = [route for route in policy.routes if route.name == "create_charge"]
    assert charge.approval is not None
    assert charge.approval.approval_ttl_s == 300
    assert all(route.approval is None for route in policy.routes if route is not charge)


@pytest.mark.parametrize(
    ("approvals", "says"),
    [
        ("{charge: {}}", "names route 'charge', which policy 'stripe' does not have"),
        ("{read: {}}", "a safe route sends no effect to approve"),
        ("{create_charge: {when: [{param: id, in: ['1']}]}}", "param 'id', which is no parameter"),
        ("{create_charge: {when: [{field: amount, above: 1}]}}", "not a JSON pointer"),
    ],
)
def test_an_approval_that_cannot_apply_is_refused_naming_the_upstream(
    tmp_path: Path, approvals: str, says: str
) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text(
        f"upstreams:\n  stripe:\n    url: https://api.stripe.com\n    approvals: {approvals}\n"
    )
    with pytest.raises(ConfigError, match=says):
        load_config(config, environ={})
