"""A real Prometheus (Debian's ``prometheus`` package) scraping test processes, and its API.

It listens on loopback only, keeps its data under the test's tmp_path, scrapes and evaluates
its rules every second, and is stopped by its PID like every other test process.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
import yaml

from tests.support.processes import Process, free_port, http_get, wait_for_port

PROMETHEUS = "/usr/bin/prometheus"
INSTALL_HINT = "apt-get install prometheus (Debian's package: /usr/bin/prometheus)"

T = TypeVar("T")


@dataclass(frozen=True)
class Target:
    """One scraped admin listener, with the labels a PodMonitor would give it."""

    address: str  # host:port
    namespace: str
    pod: str


class PrometheusServer(Process):
    def __init__(self, directory: Path, targets: list[Target], rule_files: list[Path]) -> None:
        binary = shutil.which("prometheus") or PROMETHEUS
        assert Path(binary).is_file(), f"prometheus is missing: {INSTALL_HINT}"
        self.port = free_port()
        config = directory / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {
                        "scrape_interval": "1s",
                        "scrape_timeout": "900ms",
                        "evaluation_interval": "1s",
                    },
                    "rule_files": [str(path) for path in rule_files],
                    "scrape_configs": [
                        {
                            "job_name": "idemproxy",
                            "static_configs": [
                                {
                                    "targets": [target.address],
                                    "labels": {"namespace": target.namespace, "pod": target.pod},
                                }
                                for target in targets
                            ],
                        }
                    ],
                },
                sort_keys=False,
            )
        )
        args = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        super().__init__("prometheus", args, directory, {"PATH": os.environ.get("PATH", "")})

    def start(self) -> None:
        super().start()
        wait_for_port(self.port, timeout_s=30)

    def _api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        status, body = http_get(url)
        document = orjson.loads(body)
        assert status == 200, (path, params, document)
        assert document["status"] == "success", (path, params, document)
        return document["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now: each item's ``metric`` and ``value``."""
        data = self._api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        result: list[dict[str, Any]] = data["result"]
        return result

    def label_values(self, label: str, match: str) -> list[str]:
        values: list[str] = self._api(f"label/{label}/values", **{"match[]": match})
        return values

    def firing(self, alert: str) -> list[dict[str, Any]]:
        """The labels and value of each firing alert of that name."""
        alerts = self._api("alerts")["alerts"]
        return [
            {**a["labels"], "value": float(a["value"])}
            for a in alerts
            if a["labels"]["alertname"] == alert and a["state"] == "firing"
        ]

    def targets_up(self) -> int:
        return sum(1 for item in self.query("up == 1"))


def eventually(
    check: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 20.0, step_s: float = 0.25
) -> T:
    """``check()`` until ``done`` says yes; the last answer when it times out, for the assert."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(step_s)
