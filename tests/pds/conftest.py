"""The reference Bluesky PDS behind `idemproxy serve`, with a fault relay between the two.

One PDS serves the whole session (it takes seconds to start): agent SDK -> proxy -> relay ->
PDS. Each test makes its own account, so what it counts in its repository is its own, and gets
a relay with an empty log and nothing armed. The PDS must be there: when it cannot be installed
or started the tests fail with the reason, they never skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.pds.agent import Agents, Batch
from tests.pds.direct import Account, create_account
from tests.support.pds import PdsUnavailable, ReferencePds, installed_pds
from tests.support.pds_relay import PdsRelay, running_relay
from tests.support.processes import REPO, ServedProxy, running

# The agent of requests that name none; tests name their own (Batch).
AGENT_ID = "pds-tests"
# Short, so a held answer times out within a test; the relay holds for longer (DEFAULT_HOLD_S).
READ_TIMEOUT_S = 2.0


@pytest.fixture(scope="session")
def pds_install() -> Path:
    try:
        return installed_pds()
    except PdsUnavailable as error:
        failure = str(error)
    # Failed outside the except block, so the report shows the reason, not a chain of errors.
    pytest.fail(failure, pytrace=False)


@contextmanager
def started_pds(
    install: Path, log_dir: Path, *, did_doc_with_session: bool
) -> Iterator[ReferencePds]:
    """A running PDS; one that cannot start fails the tests with the reason, never skips them."""
    pds = ReferencePds(install, log_dir, did_doc_with_session=did_doc_with_session)
    try:
        pds.start()
    except PdsUnavailable as error:
        failure = str(error)
    else:
        try:
            yield pds
        finally:
            pds.stop()
        return
    pds.stop()
    pytest.fail(failure, pytrace=False)


@pytest.fixture(scope="session")
def pds(pds_install: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferencePds]:
    """The PDS most tests use: its session answers carry the DID document, as bsky.social's do."""
    log_dir = tmp_path_factory.mktemp("pds")
    with started_pds(pds_install, log_dir, did_doc_with_session=True) as started:
        yield started


@pytest.fixture(scope="session")
def relay_server(pds: ReferencePds) -> Iterator[PdsRelay]:
    with running_relay(pds.url) as relay:
        yield relay


@pytest.fixture
def relay(relay_server: PdsRelay) -> PdsRelay:
    relay_server.reset()
    return relay_server


def write_config(
    directory: Path,
    upstream_url: str,
    store: str,
    *,
    read_timeout_s: float = READ_TIMEOUT_S,
    policy: Path | None = None,
) -> Path:
    """A config with the one upstream ``bluesky`` (its shipped pack unless ``policy``)."""
    lines = [
        f"agent_id: {AGENT_ID}",
        f"store: {store}",
        "upstreams:",
        "  bluesky:",
        f"    url: {upstream_url}",
        f"    read_timeout_s: {read_timeout_s}",
    ]
    if policy is not None:
        lines.append(f"    policy: {policy}")
    config = directory / "idemproxy.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


def check_served_source() -> None:
    """The proxy must run this checkout's src/, not the venv's install of another checkout.

    `idemproxy serve` inherits this process's environment; ask the same interpreter with it
    where `idemproxy` comes from.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
    probe = [sys.executable, "-c", "import idemproxy; print(idemproxy.__file__)"]
    done = subprocess.run(probe, capture_output=True, text=True, env=env, check=True)
    served = Path(done.stdout.strip()).resolve().parent
    if served != REPO / "src" / "idemproxy":
        pytest.fail(
            f"`idemproxy serve` would run {served}, not {REPO / 'src' / 'idemproxy'}:"
            f" run pytest with PYTHONPATH={REPO / 'src'}:{REPO}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def proxy(
    relay_server: PdsRelay, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedProxy]:
    """`idemproxy serve` in front of the relay, on a SQLite store."""
    check_served_source()
    directory = tmp_path_factory.mktemp("proxy")
    config = write_config(directory, relay_server.url, f"sqlite:///{directory}/store.db")
    served = ServedProxy(directory, "--config", str(config))
    with running(served):
        yield served


@pytest.fixture
def account(pds: ReferencePds) -> Account:
    return create_account(pds.url)


@pytest.fixture
def batch() -> Batch:
    run = uuid.uuid4().hex[:12]
    return Batch(agent=f"agent-{run}", name=f"batch-{run}")


@pytest.fixture
def agents(proxy: ServedProxy) -> Iterator[Agents]:
    started = Agents(proxy)
    yield started
    started.close()
