"""What outlives a record outlives the longest-lived one."""

from __future__ import annotations

from idemproxy.policies.route import Route
from idemproxy.store import retention


def test_the_longest_route_ttl_is_the_one_retention_is_cut_from() -> None:
    ttl = Route.model_fields["ttl_s"]
    bounds = [getattr(item, "le", None) for item in ttl.metadata]
    assert retention.MAX_RECORD_TTL_S in bounds


def test_audit_archives_and_controls_explain_a_record_as_long_as_it_can_live() -> None:
    for kept_s in (
        retention.AUDIT_RETENTION_S,
        retention.ARCHIVE_RETENTION_S,
        retention.CONTROL_RETENTION_S,
    ):
        assert kept_s >= retention.MAX_RECORD_TTL_S


def test_a_fence_counter_outlives_every_record_it_numbered() -> None:
    assert retention.FENCE_RETENTION_MS >= 2 * retention.MAX_RECORD_TTL_S * 1000


def test_events_are_kept_for_a_week() -> None:
    assert retention.EVENT_RETENTION_S == 7 * 86_400


def test_the_default_figures_are_the_constants_and_controls_follow_the_audit_log() -> None:
    kept = retention.DEFAULT_RETENTION
    assert (kept.events_s, kept.audit_s, kept.archive_s) == (
        retention.EVENT_RETENTION_S,
        retention.AUDIT_RETENTION_S,
        retention.ARCHIVE_RETENTION_S,
    )
    configured = retention.Retention(events_s=3600, audit_s=7200, archive_s=10_800)
    assert (configured.events_ms, configured.audit_ms, configured.archive_ms) == (
        3_600_000,
        7_200_000,
        10_800_000,
    )
    assert (configured.control_s, configured.control_ms) == (7200, 7_200_000)
