"""Policy files: loaded by pack name or path; every mistake named by file, line, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from idemproxy.cli import main
from idemproxy.errors import ConfigError
from idemproxy.policies.kinds import AdapterName, EffectClass
from idemproxy.policies.loader import load_policy, parse_policy, shipped_packs


def test_every_pack_the_spec_names_ships() -> None:
    expected = {"discord", "bluesky", "stripe", "slack", "openai", "anthropic", "generic"}
    assert expected <= set(shipped_packs())
    for name in shipped_packs():
        assert load_policy(name).name == name


def test_a_policy_file_loads_by_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nadapter: stripe\nroutes:\n"
        "  - {name: write, match: {methods: [POST]}, native_key: true}\n"
        "default: {name: other}\n"
    )

    policy = load_policy(str(path))

    assert policy.adapter is AdapterName.STRIPE
    assert policy.routes[0].native_key
    assert policy.default.effect is EffectClass.EXTERNAL
    assert policy.window_s == 23 * 3600


def test_neither_pack_nor_file_says_what_is_available() -> None:
    with pytest.raises(ConfigError, match=r"neither a shipped pack .*discord.*nor a readable file"):
        load_policy("no-such-pack")


BAD_POLICIES = [
    # a typo: the unknown key's own line
    ("name: x\ndefault:\n  name: w\n  efect: safe\n", 4, "default.efect: unknown key; remove it"),
    ("name: x\ndefault: {name: w, effect: sometimes}", 2, "'sometimes' is not allowed"),
    # a bad pointer
    ("name: x\ndefault:\n  name: w\n  volatile_fields: [nonce]\n", 4, "not a JSON pointer"),
    ("name: x\ndefault: {name: w, external_id: id}", 2, "write it like '/nonce'"),
    ("name: x\ndefault: {name: w, external_id: /items/*/id}", 2, "'*' is for volatile_fields"),
    # an unknown adapter
    ("name: x\nadapter: strip\ndefault: {name: w}", 2, "'strip' is not allowed"),
    # impossible windows
    (
        "name: x\nadapter: discord\nnative_window_s: 900\ndefault: {name: w}",
        3,
        "at most 300 s, so a re-send after 900 s could act twice; set at most 300",
    ),
    (
        "name: x\nadapter: stripe\nnative_window_s: 90000\ndefault: {name: w}",
        3,
        "set at most 86400",
    ),
    ("name: x\nadapter: bluesky\nnative_window_s: 60\ndefault: {name: w}", 3, "no dedupe window"),
    ("name: x\nnative_window_s: 0\ndefault: {name: w}", 2, "greater than or equal to 1"),
    # an overlap that makes a route unreachable
    (
        "name: x\nroutes:\n  - name: any_write\n    match: {methods: [POST, PUT]}\n"
        "  - name: create\n    match: {methods: [POST], path: /messages}\ndefault: {name: w}\n",
        6,
        "route 'create' can never match: route 'any_write' above it (routes.0)",
    ),
    # a native key the policy cannot give
    ("name: x\ndefault:\n  name: w\n  native_key: true\n", 4, "set 'adapter: stripe'"),
    (
        "name: x\nadapter: stripe\ndefault: {name: w, native_key: true, match: {methods: [PUT]}}",
        3,
        "native keys go on POST requests only",
    ),
    (
        "name: x\nadapter: stripe\ndefault: {name: w, effect: safe, native_key: true}",
        3,
        "a safe route has none",
    ),
    # a scope that cannot work
    ("name: x\nscope:\n  headers: [Authorization]\ndefault: {name: w}", 3, "set 'credential'"),
    ("name: x\nscope: {headers: [Idem-Agent]}\ndefault: {name: w}", 2, "proxy's own header"),
    ("name: x\nscope: {headers: [A, a]}\ndefault: {name: w}", 2, "'a' is listed twice"),
    ("name: x\nscope: {headers: ['a b']}\ndefault: {name: w}", 2, "not an HTTP header name"),
    ("name: x\nscope: {credential: token}\ndefault: {name: w}", 2, "'token' is not allowed"),
    ("name: x\nscope: {header: [A]}\ndefault: {name: w}", 2, "scope.header: unknown key"),
    ("name: x\ndefault: {name: w, retry: {attempts: 2}}", 2, "only allowed on safe routes"),
    ("name: x\ndefault: {name: w, match: {methods: [FETCH]}}", 2, "unknown HTTP method"),
    ("name: x\ndefault: {name: w, match: {path: 'no-slash'}}", 2, "must start with '/'"),
    ("name: x\ndefault: {name: w, match: {path: '/{a*}/b'}}", 2, "last segment"),
    ("name: x\ndefault: {name: w, match: {path: '/{id}/x/{id}'}}", 2, "'{id}' appears twice"),
    ("name: x\ndefault: {name: w, match: {path: '/{id}/bot{id}'}}", 2, "'{id}' appears twice"),
    ("name: x\ndefault: {name: w, match: {path: '/{token}bot'}}", 2, "'prefix{name}'"),
    ("name: x\ndefault: {name: w, match: {path: '/a{b}{c}'}}", 2, "is not a literal"),
    ("name: x\ndefault: {name: w, match: {path: '/a/bot{rest*}'}}", 2, "is not a literal"),
    # a secret the template does not have, or one a compensation would need
    (
        "name: x\ndefault:\n  name: w\n  match: {path: '/hooks/{id}/{token}'}\n"
        "  secret_path_params: [tokn]\n",
        5,
        "secret_path_params names 'tokn', which is no parameter of /hooks/{id}/{token}"
        " (it has: id, token)",
    ),
    (
        "name: x\ndefault:\n  name: w\n  match: {path: '/hooks/{token}'}\n"
        "  secret_path_params: [token, token]\n",
        5,
        "'token' is listed twice",
    ),
    (
        "name: x\ndefault:\n  name: w\n  match: {path: '/hooks/{id}/{token}'}\n"
        "  secret_path_params: [token]\n"
        "  compensation: {method: DELETE, path: '/hooks/{path.id}/{path.token}/messages/1'}\n",
        3,
        "{path.token} is a secret path parameter, which a record never keeps",
    ),
    ("name: x\ndefault: {name: w, lease_ms: 5}", 2, "default.lease_ms"),
    # a record that could expire before its lease
    (
        "name: x\ndefault: {name: w, lease_ms: 60000, ttl_s: 30}",
        2,
        "ttl_s 30 is shorter than its lease_ms 60000; set ttl_s to at least 60",
    ),
    ("name: x\nroutes: [{name: w}]\ndefault: {name: w}", 1, "used twice"),
    ("name: x\n", 1, "default: required; add it"),
    ("[1, 2]", 1, "YAML mapping"),
    ("name: x\ndefault: {name: w\n", 3, "not valid YAML"),
]


@pytest.mark.parametrize(("document", "line", "expected"), BAD_POLICIES)
def test_bad_policies_name_the_line_the_field_and_the_fix(
    document: str, line: int, expected: str
) -> None:
    with pytest.raises(ConfigError) as error:
        parse_policy(document, "my-policy.yaml")
    assert str(error.value).startswith(f"my-policy.yaml, line {line}: ")
    assert expected in str(error.value)


def test_check_config_and_serve_refuse_a_bad_policy_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "api.yaml"
    policy.write_text("name: api\ndefault:\n  name: write\n  on_missing_ky: reject\n")
    config = tmp_path / "idemproxy.yaml"
    config.write_text(f"upstreams:\n  api: {{url: https://api.test, policy: {policy}}}\n")

    assert main(["check-config", str(config)]) == 2
    checked = capsys.readouterr().err
    assert main(["serve", "--config", str(config), "--store", "memory://"]) == 2
    served = capsys.readouterr().err

    for message in (checked, served):
        assert f"upstream 'api': {policy}, line 4: default.on_missing_ky: unknown key" in message
        assert "Traceback" not in message


def test_check_config_names_each_upstreams_pack_and_adapter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "idemproxy.yaml"
    config.write_text(
        "upstreams:\n  discord: {url: https://discord.com/api}\n"
        "  bluesky: {url: https://bsky.social}\n  mine: {url: https://mine.test}\n"
    )

    assert main(["check-config", str(config)]) == 0

    out = capsys.readouterr().out
    assert "upstream discord: https://discord.com/api policy discord (adapter discord;" in out
    assert "upstream bluesky: https://bsky.social policy bluesky (adapter bluesky;" in out
    assert "upstream mine: https://mine.test policy generic (adapter none; 3 routes:" in out
