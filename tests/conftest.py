"""Shared test set-up: quiet, deterministic, headless."""

from __future__ import annotations

import os

# Two cores shared with other processes: busy-waiting OpenMP threads can make torch up to
# 10x slower per step. Must be set before torch starts its thread pool (and is inherited
# by the notebook kernels nbval starts).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # this process only; notebook kernels keep the inline backend

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    """Every test starts from the same seed and leaves no open figure behind."""
    torch.manual_seed(0)
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


# --- Tiers (tests/_tiers.py says what each marker means) -------------------------------------

import hashlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _tiers  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
_HOST_KEY = pytest.StashKey[dict]()
_OUTCOMES_KEY = pytest.StashKey[dict]()
_NOT_FAST = {"notebooks", "sandbox", "slow", "system", "e2e"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark notebook cells ``notebooks``, e2e tests also ``system``, everything else with no tier
    ``fast`` (before ``-m`` selects); run the host check last."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
        names = {m.name for m in item.iter_markers()}
        if "e2e" in names and "system" not in names:
            item.add_marker(pytest.mark.system)
            names.add("system")
        if not names & _NOT_FAST:
            item.add_marker(pytest.mark.fast)
    items.sort(key=lambda it: it.nodeid.startswith("tests/test_host_unchanged.py"))


def _missing(item) -> str | None:
    names = {m.name for m in item.iter_markers()}
    if "system" in names and not _tiers.system_asked(item.config.getoption("markexpr") or ""):
        return None  # not asked: skipped in pytest_runtest_setup, whatever the machine has
    if "e2e" in names and (why := _tiers.missing_browser_pieces()):
        return why
    if ("sandbox" in names or "e2e" in names) and (why := _tiers.missing_sandbox()):
        return why
    return None


def pytest_runtest_setup(item):
    names = {m.name for m in item.iter_markers()}
    if "system" in names and not _tiers.system_asked(item.config.getoption("markexpr") or ""):
        pytest.skip(f"system tier not asked (it creates Unix users or installs outside the checkout): "
                    f"run it with {_tiers.SYSTEM_ENV}=1 or -m system")
    why = _missing(item)
    if why:
        if _tiers.in_ci():
            pytest.fail(f"CI=true and a machine piece is missing: {why}", pytrace=False)
        pytest.skip(why)


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcomes = _session_config.stash.setdefault(_OUTCOMES_KEY, {}) if _session_config else {}
        for tier in report.tiers if hasattr(report, "tiers") else ():
            outcomes.setdefault(tier, []).append(report.outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.tiers = [t for t in _tiers.TIERS if item.get_closest_marker(t) is not None]


_session_config = None


def pytest_configure(config):
    global _session_config
    _session_config = config
    config.stash[_HOST_KEY] = host_snapshot()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    outcomes = config.stash.get(_OUTCOMES_KEY, {})
    if not outcomes:
        return
    parts = []
    for tier in _tiers.TIERS:
        got = outcomes.get(tier)
        if not got:
            continue
        ran = sum(o != "skipped" for o in got)
        if ran == 0:
            parts.append(f"{tier}: skipped")
        elif ran < len(got):
            parts.append(f"{tier}: ran {ran}, skipped {len(got) - ran}")
        else:
            parts.append(f"{tier}: ran {ran}")
    terminalreporter.write_line("tiers: " + "; ".join(parts) + " (skip reasons: the short test summary)")


def host_snapshot() -> dict[str, str]:
    """Digests of what a default test run must leave unchanged: the system's users and
    groups, what lies in /opt (two levels of names), and the checkout (tracked content and
    untracked names, less what Python and pytest cache)."""
    snap: dict[str, str] = {}
    for f in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
        try:
            snap[f] = hashlib.sha256(Path(f).read_bytes()).hexdigest()
        except OSError:
            snap[f] = "unreadable"
    opt = Path("/opt")
    names = []
    if opt.is_dir():
        for top in sorted(opt.iterdir()):
            names.append(top.name)
            if top.is_dir() and not top.is_symlink():
                try:
                    names += [f"{top.name}/{p.name}" for p in sorted(top.iterdir())]
                except OSError:
                    pass
    snap["/opt"] = hashlib.sha256("\n".join(names).encode()).hexdigest()
    try:
        status = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--ignored", "--untracked-files=all"],
                                cwd=REPO, capture_output=True, timeout=60, check=True).stdout
        ignored_ok = (".venv/", "__pycache__/", ".pytest_cache/", ".mypy_cache/", ".egg-info/")
        entries = sorted(e for e in status.decode(errors="replace").split("\0")
                         if e and not any(k in e + "/" for k in ignored_ok))
        digest = hashlib.sha256()
        for e in entries:
            digest.update(e.encode())
            path = REPO / e[3:]
            if path.is_file() and not path.is_symlink():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        snap["checkout"] = digest.hexdigest()
        snap["checkout files"] = "\n".join(entries)
    except (OSError, subprocess.SubprocessError):
        snap["checkout"] = "not a git checkout"
    return snap


@pytest.fixture(scope="session")
def host_before(pytestconfig) -> dict[str, str]:
    return pytestconfig.stash[_HOST_KEY]
