"""What the operator verbs say, and exit with, when they cannot do what was asked: one exit
code per meaning across verbs, and with ``--json`` a JSON error document instead of text."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.store.conftest import free_port
from tests.support.cli import Ran, idemproxy, json_error

KEY = "support-bot/tc:snowflake-42:call-3:d-f404f7fc63c98e31ad233e69ac952d9f"
VERBS = [
    ["status"],
    ["batch-status", "support-bot", "snowflake-42"],
    ["review", "list"],
    ["review", "resolve", KEY, "--as", "applied"],
    ["audit", "support-bot"],
    ["store", "status"],
]


@pytest.mark.parametrize("verb", VERBS, ids=lambda verb: " ".join(verb[:2]))
def test_a_store_that_does_not_exist_is_refused_and_not_created(
    tmp_path: Path, verb: list[str]
) -> None:
    ran = idemproxy(*verb, "--store", "sqlite:///typo.db", cwd=tmp_path)

    assert ran.returncode == 3
    assert ran.stdout == ""
    assert ran.stderr == (
        f"idemproxy: no store at {tmp_path / 'typo.db'}: the file does not exist"
        f" (sqlite:///typo.db names a path relative to the working directory {tmp_path}; an"
        " absolute path takes four slashes: sqlite:////var/lib/idemproxy/effects.db). Check the"
        " path: only `idemproxy serve` creates a store\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_store_under_a_missing_directory_creates_no_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/no/such/effects.db"
    ran = idemproxy("status", "--store", url, "--json")

    error = json_error(ran)
    assert (error["error"], ran.returncode) == ("store-not-found", 3)
    assert f"the directory {tmp_path / 'no'} does not exist" in error["detail"]
    assert not (tmp_path / "no").exists()


def test_a_memory_store_is_refused_since_no_other_process_can_reach_it() -> None:
    ran = idemproxy("status", "--store", "memory://")
    assert ran.returncode == 3
    assert "memory:// lives inside the process that opened it" in ran.stderr


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--store", "postgres://db/x"], {}, ["no store backend is called 'postgres'"]),
        (["--admin-url", "127.0.0.1:9090"], {}, ["--admin-url", "http://127.0.0.1:9090"]),
        (
            [],
            {"IDEMPROXY_ADMIN_URL": "localhost:9090"},
            ["IDEMPROXY_ADMIN_URL", "'localhost:9090'", "write it like http://127.0.0.1:9090"],
        ),
        (["--admin-url", "ftp://127.0.0.1:9090"], {}, ["is not an http(s) URL"]),
        (["--store", "sqlite:///x.db", "--token", "t"], {}, ["--token", "--store"]),
    ],
    ids=["store-url", "admin-url-flag", "admin-url-variable", "admin-url-scheme", "token-store"],
)
def test_a_url_or_flag_that_is_wrong_on_its_face_exits_2(
    tmp_path: Path, args: list[str], env: dict[str, str], words: list[str]
) -> None:
    ran = idemproxy("status", *args, env=env, cwd=tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith("idemproxy: ")
    for word in words:
        assert word in ran.stderr
    as_json = json_error(idemproxy("status", *args, "--json", env=env, cwd=tmp_path))
    assert (as_json["error"], as_json["exit_code"]) == ("invalid-config", 2)
    assert list(tmp_path.iterdir()) == []


def test_a_usage_error_prints_the_usage_or_with_json_an_error_document() -> None:
    ran = idemproxy("status", "--bogus")
    assert ran.returncode == 2
    assert ran.stderr.startswith("usage: idemproxy ")
    assert "unrecognized arguments: --bogus" in ran.stderr

    error = json_error(idemproxy("review", "resolve", "--json"))
    assert error["error"] == "usage"
    assert error["exit_code"] == 2
    assert "the following arguments are required: key, --as" in error["detail"]


def test_nothing_listening_at_the_admin_url_exits_3() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    ran = idemproxy("status", "--admin-url", url)
    assert ran.returncode == 3
    assert ran.stderr.startswith(f"idemproxy: nothing answers at {url} (connection refused): ")
    assert "is the proxy running" in ran.stderr
    assert "--store" in ran.stderr

    error = json_error(idemproxy("status", "--admin-url", url, "--json"))
    assert error["error"] == "admin-unreachable"


ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (lambda: web.Response(text="404 page not found", status=404), "404 text/plain"),
        (lambda: web.json_response({"ok": True}), "not a document of the admin API"),
        (lambda: web.Response(text="<html/>", content_type="text/html"), "200 text/html"),
    ],
    ids=["404-text", "other-json", "html"],
)
async def test_a_server_that_is_not_the_admin_api_exits_3(
    aiohttp_server: ServerFactory, answer: Callable[[], web.Response], said: str
) -> None:
    async def anything(request: web.Request) -> web.StreamResponse:
        return answer()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    server = await aiohttp_server(app)
    url = str(server.make_url(""))

    ran = await run_aside("status", "--admin-url", url)
    assert ran.returncode == 3, ran.stderr
    assert f"the server at {url} is not idemproxy's admin API" in ran.stderr
    assert said in ran.stderr
    assert "admin_listen" in ran.stderr
    error = json_error(await run_aside("status", "--admin-url", url, "--json"))
    assert error["error"] == "not-admin-api"


async def run_aside(*args: str) -> Ran:
    """The CLI in a thread, so that the test's own server goes on answering it."""
    return await asyncio.to_thread(idemproxy, *args)


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """``idemproxy batch-status ... | head`` closes the pipe before the output ends."""
    script = Path(sys.executable).parent / "idemproxy"
    shown = subprocess.Popen(
        [str(script), "policies", "show", "stripe"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert shown.stdout is not None
    shown.stdout.close()  # the reader is gone before the first line
    _, err = shown.communicate(timeout=30)
    assert b"Traceback" not in err, err.decode()
    assert shown.returncode == 141  # as a shell reports a command that SIGPIPE stopped
