"""Every Lua script and its ARGV tuple in step; every field a script names is one fields.py has."""

from __future__ import annotations

import re
import tomllib
import typing
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from idemproxy.store.redis import lua
from idemproxy.store.redis.fields import RecordField

# A named argument: ``local lease_ms = tonumber(ARGV[3])``, or the rest: ``argv_from(4)``.
NAMED = re.compile(r"^local (\w+) = (?:tonumber\()?ARGV\[(\d+)\]\)?(?:\s*--.*)?$", re.M)
REST = re.compile(r"^local (\w+) = argv_from\((\d+)\)(?:\s*--.*)?$", re.M)
SCRIPTS = {script.name: script for script in lua.SCRIPTS}


def shipped() -> list[str]:
    """The name of every script file in the package, the prelude aside."""
    folder = resources.files(lua.__package__) / lua.SCRIPTS_DIR
    names = [item.name.removesuffix(".lua") for item in folder.iterdir()]
    return sorted(name for name in names if name != lua.PRELUDE)


def declared(text: str) -> tuple[list[str], str | None]:
    """A script's named arguments in ARGV's order, and the name of the rest (None: none)."""
    named = NAMED.findall(text)
    assert [int(index) for _, index in named] == list(range(1, len(named) + 1)), (
        "the named arguments take ARGV[1], ARGV[2], ... in turn"
    )
    rest = REST.findall(text)
    assert len(rest) <= 1
    if not rest:
        return [name for name, _ in named], None
    assert int(rest[0][1]) == len(named) + 1, "the rest starts after the last named argument"
    return [name for name, _ in named], rest[0][0]


def fields_of(args: type[tuple[Any, ...]]) -> tuple[list[str], str | None]:
    """A tuple's fields as the script names them (argv.py's rule), and the rest's name."""
    hints = typing.get_type_hints(args)
    names: list[str] = []
    rest = None
    for position, field in enumerate(args._fields):  # type: ignore[attr-defined]
        hint = hints[field]
        if isinstance(hint, type) and issubclass(hint, tuple):
            inner, inner_rest = fields_of(hint)
            assert inner_rest is None
            names += [f"{field}_{name}" for name in inner]
        elif typing.get_origin(hint) is tuple:
            assert position == len(args._fields) - 1, f"{field}: the rest comes last"  # type: ignore[attr-defined]
            rest = field
        else:
            names.append(field)
    return names, rest


def test_every_script_file_has_a_tuple_and_every_tuple_a_file() -> None:
    assert shipped() == sorted(SCRIPTS)


@pytest.mark.parametrize("name", shipped())
def test_a_scripts_named_arguments_are_its_tuples_fields_in_order(name: str) -> None:
    script = SCRIPTS[name]
    assert declared(lua.read(name)) == fields_of(script.args)


@pytest.mark.parametrize("name", shipped())
def test_a_script_reads_its_arguments_by_name_only(name: str) -> None:
    """ARGV appears only where a name is given to it: no number stands for an argument."""
    text = lua.read(name)
    named, rest = declared(text)
    assert text.count("ARGV") == len(named), "ARGV outside the named arguments"
    assert text.count("argv_from(") == (0 if rest is None else 1)


@pytest.mark.parametrize("name", shipped())
def test_every_field_a_script_names_is_one_of_keys(name: str) -> None:
    source = SCRIPTS[name].source
    assert "{{" not in source
    assert "}}" not in source


def test_a_field_keys_does_not_have_fails_the_loading() -> None:
    with pytest.raises(ValueError, match=r"no field \{\{record.colour\}\}"):
        lua.with_fields("redis.call('HGET', KEYS[1], '{{record.colour}}')")
    with pytest.raises(ValueError, match=r"no field \{\{paint.state\}\}"):
        lua.with_fields("redis.call('HGET', KEYS[1], '{{paint.state}}')")
    with pytest.raises(ValueError, match="not a field placeholder"):
        lua.with_fields("redis.call('HGET', KEYS[1], '{{ record.state }}')")


def test_a_placeholder_becomes_the_fields_name_on_the_wire() -> None:
    text = lua.with_fields("HMGET(record, '{{record.fingerprint}}', '{{record.batch_key}}')")
    assert text == f"HMGET(record, '{RecordField.FINGERPRINT}', '{RecordField.BATCH_KEY}')"
    assert text == "HMGET(record, 'fp', 'bkey')"


def test_an_installed_wheel_carries_the_scripts() -> None:
    """setuptools ships only the package data pyproject.toml names, and every script is one."""
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["idemproxy"]
    package = Path(lua.__file__).parent
    root = package.parent.parent  # the idemproxy package, which the patterns start from
    scripts = sorted(package.glob(f"{lua.SCRIPTS_DIR}/*"))
    covered = {path for pattern in patterns for path in root.glob(pattern)}
    assert scripts
    assert set(scripts) <= covered
