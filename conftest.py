"""Test tiers for every test of the repository: tests/ and the lesson notebooks (nbval).

Here, at the root, so that its hooks apply to the notebooks' items too; what each marker means
is in course_tools/tiers.py. tests/conftest.py holds the library tests' own fixtures.
"""

from __future__ import annotations

import os

# Two cores shared with other processes: busy-waiting OpenMP threads can make torch up to 10x
# slower per step; set before torch starts, and inherited by the notebooks' kernels.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# As root, the system tier runs useradd, groupdel, runuser ...: administrators' commands, which a
# minimal PATH (cron, `env -i`, some CI runners) leaves out.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    _path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(_path + [d for d in ("/usr/local/sbin", "/usr/sbin", "/sbin") if d not in _path])

import pytest  # noqa: E402

from course_tools import tiers as _tiers  # noqa: E402

_HOST_KEY = pytest.StashKey[dict]()
_OUTCOMES_KEY = pytest.StashKey[dict]()
_FAST_CPU_KEY = pytest.StashKey[dict]()
_LAZY_KEY = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Give every test its tier (before ``-m`` selects): notebook cells ``notebooks``; a test
    module's items the tier the module declares (``TIER = "fast"``, or a tier marker in its
    ``pytestmark``), unless the test carries a tier marker of its own; e2e tests also
    ``system``. A test module that declares no tier stops the run with a message saying how to
    declare one. The host check runs last."""
    undeclared: set[str] = set()
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
            _tiers.widen_output_wait(item)
        names = {m.name for m in item.iter_markers()}
        module = getattr(item, "module", None)
        if module is not None:
            try:
                tier = _tiers.declared_tier(module)
            except ValueError as err:
                raise pytest.UsageError(str(err)) from None
            if tier is None:
                undeclared.add(str(item.path.relative_to(config.rootpath)) if item.path.is_relative_to(config.rootpath)
                               else str(item.path))
            elif not names & _tiers.DECLARABLE:
                item.add_marker(getattr(pytest.mark, tier))
                names.add(tier)
        if "e2e" in names and "system" not in names:
            item.add_marker(pytest.mark.system)
    if undeclared:
        raise pytest.UsageError(_tiers.undeclared_message(sorted(undeclared)))
    items.sort(key=lambda it: it.nodeid.startswith("tests/test_host_unchanged.py"))


def _missing(item) -> str | None:
    # (a system test that was not asked for is skipped before this is called)
    names = {m.name for m in item.iter_markers()}
    if "e2e" in names and (why := _tiers.missing_browser_pieces()):
        return why
    if "browser" in names and (why := _tiers.missing_browser()):
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
def pytest_runtest_protocol(item, nextitem):
    """Measure each fast-stage test's CPU (setup to teardown, with its reaped children): the
    ones over the budget are named in the summary (course_tools/tiers.py FAST_TEST_CPU_BUDGET_S).
    torch's lazy imports are loaded before the first one is measured (tiers.load_lazy_imports)."""
    if _tiers.stage_of(m.name for m in item.iter_markers()) != "fast":
        yield
        return
    if not item.config.stash.get(_LAZY_KEY, False):
        item.config.stash[_LAZY_KEY] = True
        _tiers.load_lazy_imports()
    start = _tiers.cpu_seconds()
    yield
    item.config.stash.setdefault(_FAST_CPU_KEY, {})[item.nodeid] = _tiers.cpu_seconds() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.tiers = [t for t in _tiers.TIERS if item.get_closest_marker(t) is not None]


def pytest_addoption(parser):
    parser.addoption(_tiers.SHARD_OPTION, metavar="I/N", default=None,
                     help="run part I of N of the selected tests (after -m and -k): lesson notebooks stay whole, "
                          "the N parts together run every selected test once (.ci/run's STAGE@I/N)")


class _Shard:
    """Keeps shard I of N of the selected items (course_tools.tiers.split_shard): last, after -m and -k."""

    def __init__(self, shard: tuple[int, int]):
        self.shard = shard

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        kept, left = _tiers.split_shard(items, self.shard)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept


_session_config = None


def pytest_configure(config):
    global _session_config
    _session_config = config
    spec = config.getoption(_tiers.SHARD_OPTION)
    if spec is not None:
        try:
            shard = _tiers.parse_shard(spec)
        except ValueError as err:
            raise pytest.UsageError(str(err)) from None
        config.pluginmanager.register(_Shard(shard), "course-ci-shard")
    config.stash[_HOST_KEY] = _tiers.host_snapshot()
    _tiers.make_run_folders()


def pytest_unconfigure(config):
    """Leave nothing in the temporary directory: the run's shared folders go
    (``_tiers.remove_run_folders``), and so does an empty ``pytest-of-<user>`` folder: pytest removes
    the tmp_path folders of passing tests (tmp_path_retention_policy = "failed", pyproject.toml), and
    this removes their parent when nothing is left in it (a failed test's folder stays, printed)."""
    _tiers.remove_run_folders()
    factory = getattr(config, "_tmp_path_factory", None)
    basetemp = getattr(factory, "_basetemp", None)
    if basetemp is None or config.option.basetemp:  # never made, or the user's own folder
        return
    try:
        basetemp.parent.rmdir()  # only if empty
    except OSError:
        pass


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    over = _tiers.over_budget_message(config.stash.get(_FAST_CPU_KEY, {}))
    if over:
        terminalreporter.write_line(over, yellow=True)
    for line in _tiers.kept_lines():
        terminalreporter.write_line(line)
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


@pytest.fixture(scope="session")
def host_before(pytestconfig) -> dict[str, str]:
    return pytestconfig.stash[_HOST_KEY]
