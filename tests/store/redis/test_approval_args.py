"""The approvals' ARGV as their scripts read it: the audit entry in line, the flag as '1'."""

from __future__ import annotations

from idemproxy.store.redis import argv
from idemproxy.store.redis.approval_args import DecideApprovalArgs, ExpireApprovalsArgs


def test_a_decisions_argv_carries_its_audit_entry_in_line() -> None:
    audit = argv.AuditArgs(5, "approval.approve", "alice", "ap_1", "", "", "fine")
    args = DecideApprovalArgs(True, "alice", "ok", audit, 2000)
    assert argv.flatten(args) == [
        *("1", "alice", "ok"),
        *(5, "approval.approve", "alice", "ap_1", "", "", "fine"),
        2000,
    ]


def test_the_sweeps_approval_ids_come_last() -> None:
    assert argv.flatten(ExpireApprovalsArgs(10, 2, ("ap_1", "ap_2"))) == [10, 2, "ap_1", "ap_2"]
