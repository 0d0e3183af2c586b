"""The course's tools are one package, imported normally (issue 33).

Benchmarks, deploy, the site, the scripts and the tests import ``course_tools`` (and each other) as
packages: no ``sys.path`` insert, no ``sys.modules`` injection, no ``runpy``, no file loader. The old
command lines (``scripts/i18n.py`` and the others) are thin wrappers of ``course_tools``' modules.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent

# what turns a file into a module behind Python's back
TRICKS = re.compile(r"sys\.path\.(insert|append)|sys\.path\[|sys\.modules\[[^\]]+\]\s*=|\brunpy\b|spec_from_file_location")
# where the course's own tooling lives (course_lib and course_grader are the products: the grader's
# sandbox sets its own sys.path on purpose, and is not tooling)
TOOLING = ("benchmarks", "scripts", "deploy", "site", "course_tools")
TOOLING_FILES = ("nbgrader_config.py", "conftest.py", "tests/conftest.py", "tests/_bench.py")
# a file loaded by path on purpose: an assignment's instructor-only mistakes.py is data, not a module
ALLOWED = {"course_tools/grading_dev/testing.py": "spec_from_file_location"}
# the command lines kept from the days the tools were scripts
WRAPPERS = {"scripts/i18n.py": "course_tools.i18n", "scripts/run_notebooks.py": "course_tools.run_notebooks",
            "scripts/build_glossary.py": "course_tools.build_glossary",
            "scripts/build_fra_eng_sample.py": "course_tools.build_fra_eng_sample",
            "scripts/train_lesson4_checkpoints.py": "course_tools.train_lesson4_checkpoints",
            "scripts/train_lesson11_checkpoints.py": "course_tools.train_lesson11_checkpoints",
            "scripts/train_lesson12_checkpoints.py": "course_tools.train_lesson12_checkpoints",
            "site/build.py": "course_tools.site_build", "site/learner_branch.py": "course_tools.learner_branch",
            "deploy/course_language.py": "course_tools.course_language"}


def _tooling_files() -> list[Path]:
    files = [p for part in TOOLING for p in (ROOT / part).rglob("*.py") if "_build" not in p.parts]
    return sorted(files + [ROOT / f for f in TOOLING_FILES])


def tricks_in(text: str) -> list[str]:
    """The lines of ``text`` that import behind Python's back."""
    return [line.strip() for line in text.splitlines() if TRICKS.search(line) and not line.lstrip().startswith("#")]


def test_the_trick_finder_sees_each_trick() -> None:
    for line in ("sys.path.insert(0, str(ROOT))", "sys.path.append('x')", "sys.modules['m'] = module",
                 "mod = runpy.run_path('x.py')", "spec = importlib.util.spec_from_file_location('m', path)"):
        assert tricks_in(line) == [line], line
    assert tricks_in("if 'torch' in sys.modules:\n    # sys.path.insert(0, x)\n    pass") == []


def test_the_tools_import_normally() -> None:
    found = []
    for path in _tooling_files():
        rel = path.relative_to(ROOT).as_posix()
        lines = [line for line in tricks_in(path.read_text(encoding="utf-8")) if ALLOWED.get(rel, "\0") not in line]
        found += [f"{rel}: {line}" for line in lines]
    assert found == [], ("import these as packages instead (`from course_tools import run_notebooks`, "
                         "`from benchmarks import bench_vit`; course_lib and course_tools are installed):\n" + "\n".join(found))


def test_no_test_loads_a_file_as_a_module() -> None:
    found = [f"{p.name}: {line}" for p in sorted((ROOT / "tests").glob("*.py")) if p.name != Path(__file__).name
             for line in tricks_in(p.read_text(encoding="utf-8")) if "runpy" in line or "spec_from_file_location" in line]
    assert found == [], "\n".join(found)


def test_scripts_keep_only_shell_and_thin_wrappers() -> None:
    python = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "scripts").glob("*.py"))
    assert set(python) <= set(WRAPPERS), (
        f"Python tools belong in course_tools: {sorted(set(python) - set(WRAPPERS))}. `git mv scripts/NAME.py "
        "course_tools/NAME.py`, keep the old command line as a wrapper (`from course_tools.NAME import main`) and "
        "list it in WRAPPERS here")
    for rel, module in WRAPPERS.items():
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert [(n.module, [a.name for a in n.names]) for n in imports] == [(module, ["main"])], rel
        assert len((ROOT / rel).read_text(encoding="utf-8").splitlines()) < 15, f"{rel} is more than a wrapper"


@pytest.mark.slow  # a fresh interpreter per command line, torch in one of them
@pytest.mark.parametrize("rel", sorted(WRAPPERS))
def test_the_old_command_line_still_answers(rel: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / rel), "--help"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: "), result.stdout
