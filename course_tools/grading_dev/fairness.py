"""Grade stability: do random test inputs ever hide a typical mistake?

Test cells draw fresh sizes and inputs (:func:`course_grader.checks.fresh_rng`), so a
test that happens to draw a degenerate case (a head size D = 1, where dividing by
sqrt(D) changes nothing) can pass wrong code in some runs and fail it in others: the same
notebook would get different grades. :func:`outcomes_under_seeds` runs every test cell of a
notebook under many seeds, exactly as the grader seeds them (``--seed S`` gives test cell
``g`` the stream of ``sha256(S|g#n)``), and returns which seeds each test passed for.

This runs the notebook's code IN THIS PROCESS, without the sandbox, so it is only for the
instructor's own notebooks: the solution and the typical mistakes of
``solutions/<assignment>/mistakes.py``. Never call it on a learner's notebook; learner code
is graded by :func:`course_grader.runner.grade_submission`.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from dataclasses import dataclass, field
from typing import Iterable

import torch

from course_grader import checks
from course_grader.notebook import SourceNotebook, _cell_source, _nbgrader_meta, to_python

__all__ = ["SeedOutcomes", "outcomes_under_seeds"]


@dataclass
class SeedOutcomes:
    """Per test cell, the seeds under which it passed and the message of one failure."""

    points: dict[str, float]
    passed: dict[str, list[int]] = field(default_factory=dict)
    failed: dict[str, list[int]] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    learner_errors: list[str] = field(default_factory=list)

    def unstable(self) -> dict[str, tuple[list[int], list[int]]]:
        """Tests whose verdict depends on the seed: {grade_id: (seeds passed, seeds failed)}."""
        return {g: (self.passed[g], self.failed[g]) for g in self.points if self.passed[g] and self.failed[g]}

    def scores(self) -> set[float]:
        """The distinct total scores over all seeds (one value when grading is stable)."""
        seeds = sorted({s for g in self.points for s in self.passed[g] + self.failed[g]})
        return {sum(p for g, p in self.points.items() if s in self.passed[g]) for s in seeds}

    def always_failed(self) -> set[str]:
        return {g for g in self.points if self.failed[g] and not self.passed[g]}


def outcomes_under_seeds(source: SourceNotebook, notebook: dict, seeds: Iterable[int], *,
                         public_only: bool = False, only: set[str] | None = None) -> SeedOutcomes:
    """Run the test cells of ``source`` against ``notebook``'s code under each seed.

    The non-test code cells of ``notebook`` (a solution or a typical-mistake variant) run
    once, in order, with ``COURSE_GRADING=1``; each test cell of ``source`` (the instructor's
    version, or its public part with ``public_only``) then runs once per seed at its place in
    the notebook, in a copy of the namespace, seeded as the grader's ``--seed`` seeds it
    (and with torch's global generator seeded too, which the sandbox draws from for the
    initial weights of a learner's module).

    Args:
        source: the instructor's source notebook (the tests that count).
        notebook: the notebook whose code is tested (dict as loaded from JSON).
        seeds: the seeds to try.
        public_only: run only the public part of each test (the learner's self-check).
        only: run only these test cells (the others count as neither passed nor failed).

    Returns:
        A :class:`SeedOutcomes`.
    """
    seeds = list(seeds)
    tests = {t.grade_id: t for t in source.tests}
    result = SeedOutcomes({g: t.points for g, t in tests.items()},
                          {g: [] for g in tests}, {g: [] for g in tests})
    ns: dict = {"__name__": "__main__"}
    old_env = os.environ.get("COURSE_GRADING")
    os.environ["COURSE_GRADING"] = "1"
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for index, cell in enumerate(notebook["cells"]):
                if cell.get("cell_type") != "code":
                    continue
                gid = _nbgrader_meta(cell).get("grade_id")
                if gid in tests:
                    if only is None or gid in only:
                        _run_test_cell(tests[gid], ns, seeds, public_only, result)
                    continue
                try:
                    torch.manual_seed(0)
                    exec(compile(to_python(_cell_source(cell)), f"<cell {index}>", "exec"), ns)
                except Exception as exc:  # noqa: BLE001 - recorded, like the grader does
                    result.learner_errors.append(f"cell {index}: {type(exc).__name__}: {exc}")
    finally:
        checks.begin_test(None, "")
        if old_env is None:
            os.environ.pop("COURSE_GRADING", None)
        else:
            os.environ["COURSE_GRADING"] = old_env
    return result


def _run_test_cell(test, ns: dict, seeds: list[int], public_only: bool, result: SeedOutcomes) -> None:
    code = compile(test.release_source if public_only else test.source, f"<test {test.grade_id}>", "exec")
    for seed in seeds:
        checks.begin_test(str(seed).encode(), test.grade_id)
        torch.manual_seed(seed)
        try:
            exec(code, dict(ns))
        except Exception as exc:  # noqa: BLE001 - any failure costs the test's points
            result.failed[test.grade_id].append(seed)
            result.messages.setdefault(test.grade_id, f"{type(exc).__name__}: {exc}"[:300])
        else:
            result.passed[test.grade_id].append(seed)
