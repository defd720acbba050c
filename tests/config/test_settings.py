"""The controller and recovery settings: a bad webhook URL or secret fails config clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from idemproxy.config.loader import load_config
from idemproxy.config.settings import ConsoleReach
from idemproxy.errors import ConfigError

SECRET = "s3cr3t-0123456789abcdef"


def test_delivery_is_off_until_a_url_is_configured() -> None:
    controller = load_config(environ={}).config.controller
    assert controller.url is None
    assert (controller.attempts, controller.backoff_s, controller.max_backoff_s) == (20, 0.5, 60.0)


def test_the_environment_configures_the_controller() -> None:
    environ = {
        "IDEMPROXY_CONTROLLER__URL": "https://controller.internal:8443/events?src=idem",
        "IDEMPROXY_CONTROLLER__SECRET": SECRET,
        "IDEMPROXY_CONTROLLER__ATTEMPTS": "5",
        "IDEMPROXY_RECOVERY__ACTIONS_PER_MINUTE": "7",
    }
    config = load_config(environ=environ).config
    assert config.controller.url == "https://controller.internal:8443/events?src=idem"
    assert config.controller.secret is not None
    assert config.controller.secret.get_secret_value() == SECRET
    assert config.controller.attempts == 5
    assert config.recovery.actions_per_minute == 7


@pytest.mark.parametrize(
    "url",
    ["ftp://controller/events", "controller.internal/events", "https://[::1", "http://:80/x",
     "https://c.internal:99999/x", "https://exa mple.com/x", "https://c.internal/x#frag"],
)  # fmt: skip
def test_a_malformed_webhook_url_names_the_variable_and_the_fix(url: str) -> None:
    environ = {"IDEMPROXY_CONTROLLER__URL": url, "IDEMPROXY_CONTROLLER__SECRET": SECRET}
    with pytest.raises(ConfigError) as raised:
        load_config(environ=environ)
    message = str(raised.value)
    assert "controller.url" in message
    assert "IDEMPROXY_CONTROLLER__URL" in message
    assert "https://" in message or "fix the URL" in message


def test_a_webhook_without_a_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"controller\.secret.*openssl rand"):
        load_config(environ={"IDEMPROXY_CONTROLLER__URL": "https://c.internal/events"})


@pytest.mark.parametrize("secret", ["short", "has a space in it ok", "tab\there-0123456789"])
def test_a_weak_or_malformed_secret_is_refused_without_echoing_it(secret: str) -> None:
    environ = {
        "IDEMPROXY_CONTROLLER__URL": "https://c.internal/e",
        "IDEMPROXY_CONTROLLER__SECRET": secret,
    }
    with pytest.raises(ConfigError) as raised:
        load_config(environ=environ)
    assert "IDEMPROXY_CONTROLLER__SECRET" in str(raised.value)
    assert secret not in str(raised.value)


def test_an_unknown_controller_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"controller\.retries.*unknown setting"):
        load_config(environ={}, flags={"controller.retries": 3})


def test_the_console_answers_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    assert load_config(environ={}).config.console is ConsoleReach.LOOPBACK
    assert load_config(environ={"IDEMPROXY_CONSOLE": "any"}).config.console is ConsoleReach.ANY
    config = tmp_path / "idemproxy.yaml"
    config.write_text("console: off\n")  # YAML reads a bare off as false
    assert load_config(config, environ={}).config.console is ConsoleReach.OFF


def test_an_unknown_console_setting_names_the_choices() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(environ={"IDEMPROXY_CONSOLE": "public"})
    message = str(raised.value)
    assert "IDEMPROXY_CONSOLE" in message
    assert "'loopback', 'any' or 'off'" in message
