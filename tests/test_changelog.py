"""CHANGELOG.md keeps its released-version structure, and the upgrade guide points at it."""

from __future__ import annotations

import re
import tomllib

from tests.support.processes import REPO

CHANGELOG = REPO / "CHANGELOG.md"
RELEASE = re.compile(r"## \[(\d+)\.(\d+)\.(\d+)\] - \d{4}-\d\d-\d\d")
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def headings(level: str) -> list[str]:
    return [line for line in CHANGELOG.read_text().splitlines() if line.startswith(level + " ")]


def test_unreleased_comes_first_and_each_release_has_a_version_and_a_date() -> None:
    versions = headings("##")
    assert versions[0] == "## [Unreleased]"
    released = [RELEASE.fullmatch(heading) for heading in versions[1:]]
    assert all(released), [h for h, m in zip(versions[1:], released, strict=True) if not m]
    numbers = [tuple(int(part) for part in match.groups()) for match in released if match]
    assert numbers == sorted(numbers, reverse=True), "newest release first"


def test_entries_are_filed_under_keep_a_changelog_kinds() -> None:
    kinds = {heading.removeprefix("### ") for heading in headings("###")}
    assert kinds <= KINDS, kinds - KINDS


def test_the_package_version_is_the_newest_release_or_the_one_to_come() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    current = tuple(int(part) for part in version.split("."))
    for heading in headings("##")[1:]:
        match = RELEASE.fullmatch(heading)
        assert match is not None
        assert current >= tuple(int(part) for part in match.groups()), heading


def test_the_upgrade_guide_sends_readers_to_the_changelog() -> None:
    guide = (REPO / "docs" / "upgrading.md").read_text()
    assert "(../CHANGELOG.md)" in guide
    assert "`## [Unreleased]`" in guide
