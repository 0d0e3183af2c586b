"""The test suite never changes the machine unasked (issue 18).

Runs last (the root conftest.py orders it): compares the system's users and groups, /opt and
the checkout with the digests taken when the session started.  A run with the system tier
(COURSE_TEST_SYSTEM=1 or -m system) may add users and install under /opt; the checkout must
stay unchanged in every run: tests write to temporary directories, never into the clone.
"""

from __future__ import annotations

import pytest

from course_tools import tiers as _tiers
from course_tools.tiers import host_snapshot


TIER = "fast"  # course_tools/tiers.py


def test_checkout_unchanged(host_before):
    after = host_snapshot()
    if after["checkout"] != host_before["checkout"]:
        before_files = set(host_before.get("checkout files", "").splitlines())
        now = set(after.get("checkout files", "").splitlines())
        pytest.fail("the test run changed the checkout (tests must write to a temporary directory): "
                    f"new or changed entries {sorted(now - before_files) or '(a tracked file changed content)'}; "
                    f"gone {sorted(before_files - now)}")


def test_system_unchanged_without_system_tier(host_before, pytestconfig):
    if _tiers.system_asked(pytestconfig.getoption("markexpr") or ""):
        pytest.skip("the system tier ran: it may add users and install under /opt")
    after = host_snapshot()
    changed = _tiers.describe_changes(host_before, after, ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/opt"))
    assert not changed, (
        "between the start and the end of this test run (the system tier was not asked), these changed: "
        + "; ".join(changed) + ". A test may have done it, or another program on this machine while the "
        "tests ran (a package install, another user's job): the entries above say which.")


def test_a_change_is_described_by_its_entries() -> None:
    before = {"/etc/passwd": "a", "/etc/passwd names": "root\nbin", "/opt": "x", "/opt names": "conda"}
    after = {"/etc/passwd": "b", "/etc/passwd names": "root\nbin\nlearner1", "/opt": "y", "/opt names": "conda"}
    assert _tiers.describe_changes(before, after, ("/etc/passwd", "/opt")) == [
        "/etc/passwd: added ['learner1']", "/opt: content changed (same entries)"]
    assert _tiers.describe_changes(before, before, ("/etc/passwd", "/opt")) == []
