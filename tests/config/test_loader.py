"""Configuration layering and the errors a user sees for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idemproxy.cli import main
from idemproxy.config.settings import load_config
from idemproxy.errors import ConfigError
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


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        (
            "upstream:\n  discord: {url: 'https://discord.com/api'}\n",
            {},
            "upstream (from config file {path}): unknown setting; did you mean `upstreams`?",
        ),
        (
            "upstreams:\n  up: {urll: 'https://x.example'}\n",
            {},
            "upstreams.up.urll (from config file {path}): unknown setting; did you mean `url`?",
        ),
        (
            "upstreams: {}\n",
            {"IDEMPROXY_CONTROLER__URL": "https://c.example/events"},
            "controler (from environment variable IDEMPROXY_CONTROLER__URL): unknown setting;"
            " did you mean `controller`?",
        ),
    ],
    ids=["upstream", "nested", "variable"],
)
def test_an_unknown_setting_names_the_one_it_looks_like(
    tmp_path: Path, text: str, environ: dict[str, str], expected: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path, environ=environ)
    assert expected.format(path=path) in str(error.value)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"workers": "abc"},
            "workers (from config file {path}): must be a whole number, not 'abc'",
        ),
        (
            {"upstreams": {"Discord": {"url": "https://discord.com/api"}}},
            "upstreams.Discord (from config file {path}): an upstream's name is 1-63 of a-z, 0-9,"
            " '-' and '_', starting with a letter or digit, not 'Discord'",
        ),
        (
            {"log_level": "verbose"},
            "log_level (from config file {path}): must be one of 'debug', 'info', 'warning' or"
            " 'error', not 'verbose'",
        ),
        (
            {"recovery": {"pause_after_failures": -1}},
            "recovery.pause_after_failures (from config file {path}): must be at least 0, not -1",
        ),
        (
            {"upstreams": {"up": {"url": "https://x.example", "connect_timeout_s": 0}}},
            "upstreams.up.connect_timeout_s (from config file {path}): must be more than 0, not 0",
        ),
        (
            {"upstreams": {"up": {"policy": "generic"}}},
            "upstreams.up.url (from config file {path}): is missing; set it",
        ),
        (
            {"store_safety": {"require_persistence": "maybe"}},
            "store_safety.require_persistence (from config file {path}): must be true or false,"
            " not 'maybe'",
        ),
        (
            {"controller": "https://c.example/events"},
            "controller (from config file {path}): must be a mapping of settings (keys indented"
            " under it), not a string",
        ),
        (
            {"listen": ["a"]},
            "listen (from config file {path}): must be HOST:PORT, e.g. 127.0.0.1:8080",
        ),
        (
            {"agent_id": "has space"},
            "agent_id (from config file {path}): must be 1-255 visible ASCII characters without"
            " spaces, not 'has space'",
        ),
    ],
    ids=[
        "workers",
        "upstream-name",
        "log_level",
        "pause_after_failures",
        "connect_timeout_s",
        "missing-url",
        "require_persistence",
        "controller",
        "listen",
        "agent_id",
    ],
)
def test_a_bad_value_is_explained_in_plain_words(
    tmp_path: Path, settings: dict[str, object], expected: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    with pytest.raises(ConfigError) as error:
        load_config(path, environ={})
    message = str(error.value)
    assert expected.format(path=path) in message
    assert "Input should" not in message
    assert "String should" not in message


def test_a_secret_of_the_wrong_type_is_not_repeated(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("admin_token: [not-shown-0123456789]\n")
    with pytest.raises(ConfigError) as error:
        load_config(path, environ={})
    assert "admin_token (from config file" in str(error.value)
    assert "must be text" in str(error.value)
    assert "not-shown" not in str(error.value)


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
