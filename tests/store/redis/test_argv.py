"""ARGV as the scripts read it: nested tuples in line, flags as '1' or '0', None as ''."""

from __future__ import annotations

from idemproxy.store.redis import argv


def test_argv_is_sent_as_the_scripts_compare_it() -> None:
    args = argv.ResolveArgs(
        effect_id="e",
        expected_state="unknown",
        state="completed",
        ttl_ms=1000,
        retention_ms=2000,
        external_id="",
        reason="r",
        response=argv.ResponseArgs(True, 201, b"[]", b"body", False),
        has_audit=False,
        audit=argv.NO_AUDIT,
        expected_fence=None,
        archive_retention_ms=3000,
    )
    assert argv.flatten(args) == [
        *("e", "unknown", "completed", 1000, 2000, "", "r"),
        *("1", 201, b"[]", b"body", "0"),
        *("0", 0, "", "", "", "", "", ""),
        "",
        3000,
    ]
    listed = argv.flatten(argv.ForgetArgs(7, ("a", 1, 0, "b", 2, 1)))
    assert listed == [7, "a", 1, 0, "b", 2, 1]
