"""docs/admin-api.openapi.yaml describes exactly the routes the admin app serves (the console's
HTML pages under /console/ aside: admin/console/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from idemproxy.admin.app import build_admin_app
from idemproxy.admin.console.views import PREFIX
from idemproxy.config.loader import load_config
from idemproxy.metrics import Metrics
from idemproxy.server import build_state
from idemproxy.store.memory import MemoryStore

SPEC = Path(__file__).resolve().parents[2] / "docs" / "admin-api.openapi.yaml"
METHODS = {"get", "post", "put", "patch", "delete"}


def served_routes() -> set[tuple[str, str]]:
    state = build_state(load_config(environ={}), MemoryStore(), Metrics())
    app: web.Application = build_admin_app(state)
    return {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"
        and not route.resource.canonical.startswith(PREFIX)
    }


def documented_routes(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, path)
        for path, operations in spec["paths"].items()
        for method in operations
        if method in METHODS
    }


def test_every_route_is_documented_and_nothing_else() -> None:
    spec = yaml.safe_load(SPEC.read_text())
    assert spec["openapi"].startswith("3.")
    assert documented_routes(spec) == served_routes()


def test_every_path_parameter_is_declared() -> None:
    spec = yaml.safe_load(SPEC.read_text())
    declared = spec["components"]["parameters"]
    for path, operations in spec["paths"].items():
        names = {part[1:-1] for part in path.split("/") if part.startswith("{")}
        for method, operation in operations.items():
            refs = [p.get("$ref", "").rpartition("/")[2] for p in operation.get("parameters", [])]
            in_path = {
                declared[ref]["name"] for ref in refs if ref and declared[ref]["in"] == "path"
            }
            assert in_path == names, (method, path)
