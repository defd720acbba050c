"""How an operator verb picks what it works on: the flags over the environment, one source."""

from __future__ import annotations

import argparse

import pytest

from idemproxy.admin.client import AdminClient
from idemproxy.cli.verbs import ADMIN_URL_VARIABLE, TOKEN_VARIABLE, admin_client, operator_of
from idemproxy.errors import ConfigError


def flags(**given: object) -> argparse.Namespace:
    found: dict[str, object] = {"admin_url": None, "token": None, "store": None, "config": None}
    return argparse.Namespace(**(found | given))


async def test_the_flag_names_the_admin_api_before_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ADMIN_URL_VARIABLE, "http://127.0.0.1:1111")
    monkeypatch.setenv(TOKEN_VARIABLE, "from-env")
    client = admin_client(flags(admin_url="http://127.0.0.1:2222", token="from-flag"))
    try:
        assert client._base_url == "http://127.0.0.1:2222"
        assert client._token_source == "given with --token"
    finally:
        await client.close()
    client = admin_client(flags())
    try:
        assert client._base_url == "http://127.0.0.1:1111"
        assert client._token_source == f"in {TOKEN_VARIABLE}"
    finally:
        await client.close()


def test_a_bad_admin_url_is_refused_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ADMIN_URL_VARIABLE, "127.0.0.1:9090")
    with pytest.raises(ConfigError, match=ADMIN_URL_VARIABLE):
        admin_client(flags())
    with pytest.raises(ConfigError, match="--admin-url"):
        admin_client(flags(admin_url="ftp://127.0.0.1"))


async def test_a_token_with_a_store_is_refused_before_the_store_is_opened() -> None:
    with pytest.raises(ConfigError, match="--token is for the admin API"):
        async with operator_of(flags(store="sqlite:///nowhere.db", token="t")):
            pass


async def test_without_a_store_the_operator_is_the_admin_client() -> None:
    async with operator_of(flags(admin_url="http://127.0.0.1:9")) as operator:
        assert isinstance(operator, AdminClient)
