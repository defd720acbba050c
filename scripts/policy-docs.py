#!/usr/bin/env python3
"""Regenerate the shipped-pack route tables in docs/policies.md from the packs themselves."""

from __future__ import annotations

import sys
from pathlib import Path

from idemproxy.policies.catalog import markdown_route_tables

BEGIN, END = "<!-- routes:begin -->\n", "<!-- routes:end -->"
DOC = Path(__file__).resolve().parents[1] / "docs" / "policies.md"


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(head + BEGIN + "\n" + markdown_route_tables() + "\n" + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
