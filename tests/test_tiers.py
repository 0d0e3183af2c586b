"""Every test module declares its tier (course_tools/tiers.py); one that declares none stops collection."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from course_tools import tiers as _tiers

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent


def _module(**attrs) -> types.ModuleType:
    mod = types.ModuleType("m")
    mod.__file__ = "tests/test_m.py"
    mod.__dict__.update(attrs)
    return mod


def test_declared_tier_reads_the_constant_then_pytestmark() -> None:
    assert _tiers.declared_tier(_module(TIER="content")) == "content"
    assert _tiers.declared_tier(_module(pytestmark=[pytest.mark.skipif(False, reason="x"), pytest.mark.sandbox])) == "sandbox"
    assert _tiers.declared_tier(_module(pytestmark=pytest.mark.browser)) == "browser"
    assert _tiers.declared_tier(_module(pytestmark=pytest.mark.skipif(False, reason="x"))) is None
    assert _tiers.declared_tier(_module()) is None
    with pytest.raises(ValueError, match="'quick' is not a tier"):
        _tiers.declared_tier(_module(TIER="quick"))


def _collect(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_probe.py"
    test.write_text(source)
    # the root conftest as a plugin (-p conftest from the checkout), on a module outside it
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                           "--collect-only", "-o", "addopts=", "--rootdir", str(tmp_path), str(test)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a pytest in a subprocess: about 4 s CPU
def test_a_module_without_a_tier_fails_collection_naming_it(tmp_path: Path) -> None:
    result = _collect(tmp_path, "def test_one():\n    pass\n")
    assert result.returncode != 0
    assert "declare no tier: test_probe.py" in result.stdout + result.stderr
    assert 'TIER = "fast"' in result.stdout + result.stderr


@pytest.mark.slow  # a pytest in a subprocess: about 4 s CPU
def test_a_declared_module_collects(tmp_path: Path) -> None:
    result = _collect(tmp_path, 'TIER = "fast"\n\n\ndef test_one():\n    pass\n')
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 test collected" in result.stdout


class _Item:
    def __init__(self, path: str, nodeid: str):
        self.path, self.nodeid = Path(path), nodeid


def test_parts_are_disjoint_cover_every_item_and_keep_a_notebook_whole() -> None:
    items = ([_Item("notebooks/a.ipynb", f"notebooks/a.ipynb::Cell {i}") for i in range(3)]
             + [_Item("tests/test_x.py", f"tests/test_x.py::test_{i}") for i in range(5)]
             + [_Item("notebooks/b.ipynb", f"notebooks/b.ipynb::Cell {i}") for i in range(2)])
    kept = [_tiers.split_shard(items, (i, 3)) for i in (1, 2, 3)]
    ids = [[it.nodeid for it in k] for k, _ in kept]
    assert sorted(sum(ids, [])) == sorted(it.nodeid for it in items)  # each item in exactly one part
    for part, (_, left) in zip(ids, kept):
        assert len(part) + len(left) == len(items)
    # a notebook's cells stay together and in order; the units (a, x0 ... x4, b) are dealt round-robin
    assert ids[0] == ["notebooks/a.ipynb::Cell 0", "notebooks/a.ipynb::Cell 1", "notebooks/a.ipynb::Cell 2",
                      "tests/test_x.py::test_2", "notebooks/b.ipynb::Cell 0", "notebooks/b.ipynb::Cell 1"], ids
    assert ids[2] == ["tests/test_x.py::test_1", "tests/test_x.py::test_4"], ids
    assert [it.nodeid for it in _tiers.split_shard(items, (1, 1))[0]] == [it.nodeid for it in items]
    assert _tiers.parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "1/0", "1", "a/b", "1/2/3", "-1/2"):
        with pytest.raises(ValueError, match="a shard is I/N, part I of N"):
            _tiers.parse_shard(bad)


@pytest.mark.slow  # three pytest runs in subprocesses: about 6 s CPU
def test_the_ci_shard_option_splits_what_m_selected(tmp_path: Path) -> None:
    source = 'TIER = "fast"\nimport pytest\n\n' + "".join(
        f"def test_{i}():\n    pass\n\n\n@pytest.mark.slow\ndef test_slow_{i}():\n    pass\n\n\n" for i in range(4))
    test = tmp_path / "test_probe.py"
    test.write_text(source)
    parts = []
    for i in (1, 2):
        result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                                 "--collect-only", "-o", "addopts=", "--rootdir", str(tmp_path), "-m", "not slow",
                                 f"--ci-shard={i}/2", str(test)], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        parts.append([line.split("::")[1] for line in result.stdout.splitlines() if "::" in line])
    # the shard is taken of the tests -m selected: two of the four fast ones each, none of the slow
    assert parts == [["test_0", "test_2"], ["test_1", "test_3"]], parts
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                             "--collect-only", "-o", "addopts=", "--rootdir", str(tmp_path), "--ci-shard=3/2",
                             str(test)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "--ci-shard='3/2': a shard is I/N" in result.stderr, result.stderr


@pytest.mark.slow  # a pytest in a subprocess: about 4 s CPU
def test_lesson_cells_wait_longer_than_nbvals_five_seconds_for_their_output(tmp_path: Path) -> None:
    """nbval gives a finished cell 5 s to deliver its output messages, then fails it and skips the
    rest of the lesson; on a loaded machine a lesson failed CI that way (07b, cell 14). The root
    conftest widens the wait for every notebook cell nbval collects."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    (tmp_path / "probe.ipynb").write_text(nbformat.writes(nb))
    (tmp_path / "probe_plugin.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(trylast=True)\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        print('WAIT', type(item).__name__, item.output_timeout)\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "probe_plugin", "-p", "no:cacheprovider",
                             "-q", "-s", "--collect-only", "-o", "addopts=", "--nbval", "--rootdir", str(tmp_path),
                             str(tmp_path / "probe.ipynb")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"WAIT IPyNbCell {_tiers.NBVAL_OUTPUT_WAIT_S}" in result.stdout, result.stdout


def test_figures_prints_the_slowest_tests_pytest_reports() -> None:
    from course_tools import figures

    out = ("....\n============================= slowest 2 durations ==============================\n"
           "3.10s call     tests/test_a.py::test_one\n1.00s setup    tests/test_b.py::test_two\n"
           "=========================== 4 passed in 5.00s ===========================\n")
    got = figures.slowest(out)
    assert got.splitlines()[1:] == ["3.10s call     tests/test_a.py::test_one", "1.00s setup    tests/test_b.py::test_two"]
    assert figures.slowest("4 passed in 1.00s\n") == ""


def test_a_fast_test_over_the_cpu_budget_is_named_costliest_first() -> None:
    spent = {"tests/test_a.py::test_cheap": 0.2, "tests/test_b.py::test_trains": 2.5,
             "tests/test_c.py::test_grades": 9.0}
    line = _tiers.over_budget_message(spent, budget=1.5)
    assert line is not None and "test_cheap" not in line
    assert line.index("test_grades 9.0 s") < line.index("test_trains 2.5 s")
    assert "@pytest.mark.slow" in line
    assert _tiers.over_budget_message({"tests/test_a.py::test_cheap": 0.2}, budget=1.5) is None
    # the stage a test runs in: its first tier in the claim order, as .ci/run's
    assert _tiers.stage_of(["fast"]) == "fast"
    assert _tiers.stage_of(["parametrize", "slow", "fast"]) == "slow"
    assert _tiers.stage_of(["content", "fast"]) == "content"
    assert _tiers.stage_of(["parametrize"]) is None


@pytest.mark.slow  # a pytest in a subprocess that burns CPU on purpose: about 6 s CPU
def test_the_run_names_its_costly_fast_tests(tmp_path: Path) -> None:
    """The root conftest measures every fast-stage test's CPU and names those over
    FAST_TEST_CPU_BUDGET_S at the end; a slow test that costs as much is not named."""
    burn = _tiers.FAST_TEST_CPU_BUDGET_S + 0.3
    (tmp_path / "test_probe.py").write_text(
        "import time\n\nimport pytest\n\nTIER = \"fast\"\n\n\n"
        f"def _burn():\n    start = time.process_time()\n    while time.process_time() - start < {burn}:\n        pass\n\n\n"
        "def test_costly():\n    _burn()\n\n\n"
        "def test_cheap():\n    pass\n\n\n"
        "@pytest.mark.slow\ndef test_costly_but_slow():\n    _burn()\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                             "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("fast tests over")]
    assert "test_probe.py::test_costly " in line
    assert "test_cheap" not in line and "test_costly_but_slow" not in line


@pytest.mark.slow  # a fresh interpreter imports torch: about 2 s of CPU
def test_the_lazy_imports_are_what_a_first_comparison_and_optimizer_load() -> None:
    """After tiers.load_lazy_imports, a first torch.testing comparison and a first optimizer import
    nothing more: the fast tier's first test is charged its own cost only (a torch release that
    loads something else on first use fails here, naming it)."""
    code = ("import sys, torch\n"
            "from course_tools.tiers import load_lazy_imports\n"
            "load_lazy_imports()\n"
            "before = set(sys.modules)\n"
            "torch.testing.assert_close(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))\n"
            "torch.optim.Adam(torch.nn.Linear(2, 2).parameters()).step()\n"
            "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    assert out.strip() == "[]", out[-2000:]


def test_a_kept_folder_is_named_in_the_summary(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(_tiers, "KEPT", {})
    given = tmp_path / "shots"
    monkeypatch.setenv("COURSE_TEST_SHOTS", str(given))
    assert _tiers.keep_folder("screenshots", "COURSE_TEST_SHOTS", "shots-") == given and given.is_dir()
    _tiers.keep_folder("screenshots", "COURSE_TEST_SHOTS", "shots-")  # kept twice, named once
    monkeypatch.delenv("COURSE_TEST_SHOTS")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    made = _tiers.keep_folder("the hub's log", "COURSE_TEST_SHOTS", "hub-log-")
    assert made.parent == tmp_path and made.name.startswith("hub-log-")
    assert _tiers.kept_lines() == [f"kept for you: screenshots: {given}", f"kept for you: the hub's log: {made}"]
