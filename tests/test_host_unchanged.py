"""The test suite never changes the machine unasked (issue 18).

Runs last (the root conftest.py orders it): compares the system's users and groups, /opt and
the checkout with the digests taken when the session started.  A run with the system tier
(COURSE_TEST_SYSTEM=1 or -m system) may add users and install under /opt; the checkout must
stay unchanged in every run: tests write to temporary directories, never into the clone.
"""

from __future__ import annotations

import pytest

import _tiers
from _tiers import host_snapshot


TIER = "fast"  # tests/_tiers.py


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
    changed = [k for k in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/opt")
               if after[k] != host_before[k]]
    assert not changed, f"a default test run changed {changed} (only the system tier may)"
