"""What a user is told about a bad setting: the setting, where its value came from and what it
must be, in plain words; the known setting an unknown one looks like; never a secret's value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idemproxy.config.loader import load_config
from idemproxy.errors import ConfigError


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
