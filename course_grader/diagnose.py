"""Feedback that names the mistake (issue 30): "this looks like a softmax taken without masking".

An assignment's ``mistakes.py`` (beside its source notebook, the instructor's) lists typical
mistakes, each as the code a learner would write (``replace``: grade_id -> cell source), the
tests it fails, and, for those worth naming, a learner-facing ``hint`` with the lesson section
that covers it (``lesson``, ``section``). When grading, the grader records what each
``call()`` of a test cell returned (``course_grader.checks.record_calls``); for a failed test,
it then runs the same test cell, on the same inputs (the same seed), against the solution
with that mistake in place - instructor code, in a sandbox of its own, never the learner's -
and when the same check fails with the same message and the two recordings hold the same
outputs (or, when the check failed before any call returned, the message is a specific one),
the test's result names the mistake - unless another listed mistake matches as well.

``mistakes.py`` is part of the answer key (the instructor's folder, trusted like its test
cells): it is imported in the grading process, with the course checkout's ``tests/`` on the
path for its helpers; a file that cannot be loaded names no mistake.
"""

from __future__ import annotations

import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from course_grader.notebook import SourceNotebook, _cell_source, _nbgrader_meta, plan_submission

__all__ = ["Mistake", "load_hinted_mistakes", "mistake_notebook", "diagnose", "MAX_SESSIONS"]

#: At most this many mistakes are tried per graded notebook (each costs a sandbox run of the
#: solution's cells and of the failed tests it names).
MAX_SESSIONS = 6
#: A mistake is tried only while this many seconds of the learner's budget remain.
MIN_SECONDS_LEFT = 10.0
_LESSON = re.compile(r"[0-9]{1,2}[ab]?")


#: Failure messages that say nothing about what failed: a match on them alone names nothing.
_GENERIC = frozenset({"", "a check failed", "a hidden check failed (hidden tests are not shown)"})


class Mistake(dict):
    """One hinted entry of MISTAKES: ``key``, ``replace``, ``fails``, ``hint``, ``lesson``, ``section``."""


def _import_mistakes(path: Path) -> dict:
    """MISTAKES of the instructor's ``mistakes.py`` (trusted, like the rest of the answer key):
    imported with the course checkout's ``tests/`` on the path, where its helpers live."""
    import importlib.util
    import sys

    extra = [str(p) for p in (path.parents[2] / "tests", path.parents[2]) if p.is_dir()] if len(path.parents) > 2 else []
    old = list(sys.path)
    sys.path[:0] = [p for p in extra if p not in sys.path]
    try:
        spec = importlib.util.spec_from_file_location(f"_course_mistakes_{abs(hash(str(path)))}", path)
        if spec is None or spec.loader is None:
            return {}
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = old
    table = getattr(module, "MISTAKES", {})
    return table if isinstance(table, dict) else {}


@lru_cache(maxsize=64)
def _cached(path: str, mtime: float) -> tuple:
    return tuple(_hinted(Path(path), _import_mistakes(Path(path))))


def load_hinted_mistakes(folder: str | Path) -> list[Mistake]:
    """The mistakes of ``folder/mistakes.py`` that carry a hint, in the file's order.

    Raises:
        ValueError: an entry with a hint is malformed (says which and why).
        ImportError, OSError, SyntaxError: the file cannot be loaded.
    """
    path = Path(folder) / "mistakes.py"
    if not path.is_file():
        return []
    return list(_cached(str(path.resolve()), path.stat().st_mtime))


def _hinted(path: Path, table: dict) -> list[Mistake]:
    out = []
    for key, entry in table.items():
        if not isinstance(entry, dict) or "hint" not in entry:
            continue
        hint, lesson, section = entry.get("hint"), entry.get("lesson"), entry.get("section")
        if not (isinstance(hint, str) and hint.strip() and isinstance(lesson, str) and _LESSON.fullmatch(lesson)
                and type(section) is int and 1 <= section <= 99):
            raise ValueError(f"{path}: mistake {key!r}: a hint needs 'hint' (text for the learner), 'lesson' "
                             f"(like \"3\" or \"7a\") and 'section' (an int), got {hint!r}, {lesson!r}, {section!r}")
        replace, fails = entry.get("replace"), entry.get("fails")
        if not (isinstance(replace, dict) and replace and isinstance(fails, list) and fails):
            raise ValueError(f"{path}: mistake {key!r}: a hinted mistake needs 'replace' and 'fails'")
        out.append(Mistake(key=key, replace=dict(replace), fails=list(fails), hint=" ".join(hint.split()),
                           lesson=lesson, section=section))
    return out


def mistake_notebook(source: SourceNotebook, replace: dict[str, str]) -> dict:
    """The source notebook as a learner's: every solution cell holds the solution's code (its
    markers removed) except the cells of ``replace``, which hold the mistake's code."""
    cells = []
    for cell in source.cells:
        cell = dict(cell)
        meta = _nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if gid in replace:
            cell["source"] = replace[gid].strip("\n")
        elif meta.get("solution") and cell.get("cell_type") == "code":
            cell["source"] = "\n".join(line for line in _cell_source(cell).split("\n")
                                       if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
        cells.append(cell)
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def diagnose(source: SourceNotebook, tests: list, recorded: dict[str, list], seed_base: bytes, config: Any,
             deadline: float | None = None, learner: str | None = None) -> None:
    """Name the typical mistake a failed test's outputs match, in place on ``tests`` (the
    notebook's TestOutcomes): ``mistake``, ``hint``, ``hint_lesson``, ``hint_section``.

    Args:
        source: the instructor's source notebook (its folder holds mistakes.py).
        tests: the learner's test outcomes.
        recorded: grade_id -> what the learner's code returned in that test (checks.record_calls).
        seed_base: the seed the learner's tests ran with (the mistake's run uses the same).
        config: sandbox limits.
        learner: the learner id the notebook was graded as: the mistake's cells see the same
            variant (the caller sets it on the trusted side with ``variants.begin_grading``);
            without it, a test that reads the variant compares outputs for other sizes and
            names nothing.
        deadline: ``time.monotonic()`` by which everything must be done: the end of the
            learner's own time budget, so that naming a mistake never makes the grader's
            watchdog (course_grader.cli.learner_budget) kill a learner's grading. A mistake
            is tried only while at least :data:`MIN_SECONDS_LEFT` remain.
    """
    from course_grader.runner import _VARIANT_PRELUDE, _run_test
    from course_grader.rpc import Session
    from course_grader.sandbox import SandboxDied

    try:
        mistakes = load_hinted_mistakes(source.path.parent)
    except Exception:  # noqa: BLE001 - a broken mistakes.py names nothing; tests/test_grading_feedback_teaches.py
        return         # loads every assignment's
    failed = {t.grade_id: t for t in tests if not t.passed and not t.skipped and t.grade_id in recorded}
    by_id = {t.grade_id: t for t in source.tests}
    sessions = 0
    matches: dict[str, list[Mistake]] = {}
    from course_grader.checks import has_values, same_outputs
    for mistake in mistakes:
        targets = [g for g in mistake["fails"] if g in failed and g in by_id]
        if not targets:
            continue
        if sessions >= MAX_SESSIONS or (deadline is not None and deadline - time.monotonic() < MIN_SECONDS_LEFT):
            break
        sessions += 1
        try:
            plan = plan_submission(source, mistake_notebook(source, mistake["replace"]))
        except Exception:  # noqa: BLE001 - a malformed mistake names nothing
            continue
        session = Session(config, source.trusted_imports)
        session.deadline = deadline if deadline is not None else time.monotonic() + config.submission_timeout
        theirs: dict[str, list] = {}
        messages: dict[str, str] = {}
        try:
            session.start()
            if learner is not None:
                session.exec_cell(-1, _VARIANT_PRELUDE.format(learner=learner))
            for step in plan.steps:
                if step.kind == "learner":
                    if step.source.strip():
                        session.exec_cell(step.index, step.source)
                elif step.test is not None and step.test.grade_id in targets:
                    out = _run_test(session, step.test, step.test.grade_id, seed_base, False, record=theirs)
                    if out.passed:
                        theirs.pop(step.test.grade_id, None)
                    messages[step.test.grade_id] = out.message
        except SandboxDied:
            continue
        finally:
            session.close()
        for gid in targets:
            if gid not in theirs or messages.get(gid) != failed[gid].message:
                continue  # passed, or failed another check or in another way
            mine = recorded[gid]
            if has_values(mine) or has_values(theirs[gid]):
                same = same_outputs(mine, theirs[gid])  # the same outputs on the same inputs
            else:  # the check failed before any output worth comparing: its message must say what
                same = len(mine) == len(theirs[gid]) and failed[gid].message not in _GENERIC
            if same:
                matches.setdefault(gid, []).append(mistake)
    for gid, found in matches.items():
        if len(found) == 1:  # two mistakes that look alike on this test: naming either could mislead
            t, mistake = failed[gid], found[0]
            t.mistake, t.hint = mistake["key"], mistake["hint"]
            t.hint_lesson, t.hint_section = mistake["lesson"], mistake["section"]
