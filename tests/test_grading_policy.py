"""Issue 29: the sandbox's policy is data in one file an auditor reads first.

* every bound of ``course_grader/policy.py`` (``policy.BOUNDS``) is the table of
  docs/GRADING.md's "Policy" section, and the modules that carry the policy out read their caps
  from it;
* every path bubblewrap binds is named by the policy (the third edition bound
  ``/sys/devices/system/cpu`` without policy.py or the docs saying so);
* the libseccomp builder (mechanism) is not in the policy file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_grader import policy

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]


def _docs_table() -> dict[str, tuple[str, str]]:
    text = (ROOT / "docs" / "GRADING.md").read_text()
    section = text.split("### Policy: every bound in one table", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `([A-Z_]+)` \| (.*) \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_the_docs_list_every_bound_of_the_policy_file():
    table = _docs_table()
    assert table, "docs/GRADING.md has no Policy table"
    expected = {name: (value, what) for name, value, what in policy.BOUNDS}
    assert table == expected


def test_the_modules_read_their_caps_from_the_policy_file():
    from course_grader import notebook, protocol, runner, sandbox
    for module, names in ((protocol, ("MAX_MESSAGE_BYTES", "MAX_DEPTH", "MAX_NODES", "MAX_TENSOR_BYTES")),
                          (runner, ("MAX_NOTEBOOK_BYTES", "MAX_OUTPUT_CHARS", "MAX_CELLS_RECORDED", "MAX_NOTES")),
                          (notebook, ("MAX_JSON_DEPTH",))):
        for name in names:
            assert getattr(module, name) == getattr(policy, name), f"{module.__name__}.{name}"
    cfg = sandbox.SandboxConfig()
    assert (cfg.memory_bytes, cfg.file_size_bytes, cfg.cpu_seconds, cfg.max_processes, cfg.max_open_files,
            cfg.tmp_bytes, cfg.cell_timeout, cfg.call_timeout, cfg.submission_timeout, cfg.grader_memory_bytes) == (
        policy.LEARNER_MEMORY_BYTES, policy.FILE_SIZE_BYTES, policy.CPU_SECONDS, policy.MAX_PROCESSES,
        policy.MAX_OPEN_FILES, policy.TMP_BYTES, policy.CELL_TIMEOUT, policy.CALL_TIMEOUT,
        policy.SUBMISSION_TIMEOUT, policy.GRADER_MEMORY_BYTES)


def test_every_path_bubblewrap_binds_is_named_by_the_policy(monkeypatch):
    from course_grader import sandbox
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: "/usr/bin/bwrap")
    argv = sandbox.bwrap_argv(zygote=True)
    named = set(policy.READ_ONLY_SYSTEM) | set(policy.READ_ONLY_ETC) | set(policy.READ_ONLY_SYS)
    installation = set(sandbox._readable_paths())  # the Python installation and the two packages
    for i, arg in enumerate(argv):
        if arg in ("--ro-bind", "--ro-bind-try", "--bind", "--bind-try", "--dev-bind"):
            src = argv[i + 1]
            assert src in named or src in installation, f"bubblewrap binds {src}, which policy.py does not name"
    assert "/sys/devices/system/cpu" in policy.READ_ONLY_SYS
    for source in ("sandbox.py", "sandbox_main.py"):  # no path of its own in the mechanism
        assert "/sys/devices" not in (ROOT / "course_grader" / source).read_text(), source


def test_the_seccomp_builder_is_mechanism_outside_the_policy_file():
    text = (ROOT / "course_grader" / "policy.py").read_text()
    assert "ctypes" not in text.split("from course_grader.seccomp import")[0]
    from course_grader import seccomp
    assert policy.seccomp_support is seccomp.seccomp_support  # the third edition's name still works


@pytest.mark.parametrize("name", ["LEARNER_MEMORY_BYTES", "READ_ONLY_SYS", "SANDBOX_PRELOAD", "PREFLIGHT_CELL"])
def test_the_policy_names_the_new_bounds(name):
    assert getattr(policy, name)
