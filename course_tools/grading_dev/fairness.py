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

import ast
import builtins
import contextlib
import io
import os
import symtable
import warnings
from dataclasses import dataclass, field
from typing import Iterable

import torch

from course_grader import checks
from course_grader.notebook import SourceNotebook, _cell_source, _nbgrader_meta, to_python

__all__ = ["SeedOutcomes", "affected_tests", "outcomes_under_seeds"]


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
    initial weights of a learner's module). A test cell that, under the first seed, drew
    nothing from either runs only once: its verdict counts for every seed.

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
    for i, seed in enumerate(seeds):
        checks.begin_test(str(seed).encode(), test.grade_id)
        torch.manual_seed(seed)
        start = torch.get_rng_state()
        try:
            exec(code, dict(ns))
        except Exception as exc:  # noqa: BLE001 - any failure costs the test's points
            verdict = result.failed
            result.messages.setdefault(test.grade_id, f"{type(exc).__name__}: {exc}"[:300])
        else:
            verdict = result.passed
        if i == 0 and checks.seeded_draws() == 0 and torch.equal(torch.get_rng_state(), start):
            # the test drew nothing from what the seed sets (the grader's stream, torch's global
            # generator): every seed runs the same code on the same values, to the same verdict
            verdict[test.grade_id].extend(seeds)
            return
        verdict[test.grade_id].append(seed)


#: Names that reach a namespace or an object by a computed name: a cell that uses one may touch
#: anything.
_DYNAMIC = {"globals", "locals", "vars", "eval", "exec", "__import__", "compile", "setattr", "delattr",
            "__builtins__", "sys", "builtins", "importlib"}


@dataclass
class _Names:
    touched: set[str]  # the module-level names the code uses, binds or deletes (also inside functions)
    bound: set[str]  # the module-level names it binds (assignments, def, class, import, global, del)
    stored_into: set[str]  # base names of attribute or item stores: x.a = ..., x[i] += ..., del x.a
    passed: set[str]  # names given to a call as an argument (the callee may mutate them)
    imported: set[str]  # the names its top-level import statements bind


def _module_names(table: symtable.SymbolTable, out: _Names) -> None:
    top = table.get_type() == "module"
    for sym in table.get_symbols():
        if top or sym.is_global() or sym.is_declared_global():
            out.touched.add(sym.get_name())
            if (top and (sym.is_assigned() or sym.is_imported() or sym.is_namespace())) or \
                    (sym.is_declared_global() and sym.is_assigned()):
                out.bound.add(sym.get_name())
    for child in table.get_children():
        _module_names(child, out)


def _names(source: str) -> _Names | None:
    """The module-level names a cell's code touches, binds, stores into and passes to calls (a
    function's own arguments and locals are not module-level names); None when that cannot be
    known (it does not parse, imports *, or reaches names by a computed name: ``globals()``,
    ``setattr``, ``sys.modules``, ...)."""
    code = to_python(source)
    try:
        tree = ast.parse(code)
        table = symtable.symtable(code, "<cell>", "exec")
    except SyntaxError:
        return None
    out = _Names(set(), set(), set(), set(), {(a.asname or a.name).split(".")[0] for n in tree.body
                                              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names})
    _module_names(table, out)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript, ast.Call)):
                base = base.func if isinstance(base, ast.Call) else base.value
            if isinstance(base, ast.Name):
                out.stored_into.add(base.id)
        elif isinstance(node, ast.Call):
            # an argument that is a name, or a part of one (model.encoder, rows[0]), hands that
            # object to the callee; a call's result (torch.ones(3)) is a new object
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                arg = arg.value if isinstance(arg, ast.Starred) else arg
                while isinstance(arg, (ast.Attribute, ast.Subscript)):
                    arg = arg.value
                if isinstance(arg, ast.Name):
                    out.passed.add(arg.id)
    # a name in a nested scope is "touched" only when it resolves to the module (symtable);
    # stores and arguments may name a function's locals: keep those that are module-level
    out.stored_into &= out.touched
    out.passed &= out.touched
    return None if out.touched & _DYNAMIC else out


def affected_tests(reference: dict, changed: dict, test_ids: Iterable[str]) -> set[str]:
    """The test cells of ``test_ids`` whose outcome a change from ``reference`` (a notebook)
    to ``changed`` (the same notebook with some code cells rewritten: a typical mistake) can
    change. The others run exactly the reference's code on exactly its state, so under the
    same seed they give the reference's verdict, and a fairness check may skip them.

    Conservative, by module-level names (a function's arguments and locals are its own). A
    rewritten cell (either version) taints every name it touches, except the names the notebook
    binds only by top-level ``import`` (library modules and functions: code cannot change them
    without storing into them, ``torch.x = ...``, or handing them to a call, which taints them)
    and Python's builtins. A later cell, code or test, that touches a tainted name is affected and
    taints in turn (it may have stored or mutated anything it names). A cell whose names cannot
    be known taints everything. Tests before the first rewritten cell are never affected.
    Notebooks whose code cells do not pair up (a cell added or removed) give every test.
    """
    tests = set(test_ids)
    old = [c for c in reference["cells"] if c.get("cell_type") == "code"]
    new = [c for c in changed["cells"] if c.get("cell_type") == "code"]
    if len(old) != len(new) or any(_nbgrader_meta(a).get("grade_id") != _nbgrader_meta(b).get("grade_id")
                                   for a, b in zip(old, new)):
        return tests
    parsed_old = [_names(_cell_source(c)) for c in old]
    parsed_new = [_names(_cell_source(c)) for c in new]
    # names bound only by import statements, never otherwise, in either notebook
    imported: set[str] = set()
    rebound: set[str] = set()
    for names in [*parsed_old, *parsed_new]:
        if names is not None:
            imported |= names.imported
            rebound |= names.bound - names.imported
    library = (imported - rebound) | set(dir(builtins))

    def taint_of(names: _Names) -> set[str]:
        return (names.touched - library) | names.bound | names.stored_into | names.passed

    everything = False
    tainted: set[str] = set()
    affected: set[str] = set()
    for a, b, na, nb in zip(old, new, parsed_old, parsed_new):
        gid = _nbgrader_meta(b).get("grade_id")
        if _cell_source(a) != _cell_source(b):
            if na is None or nb is None:
                everything = True
            else:
                tainted |= taint_of(na) | taint_of(nb)
            if gid in tests:
                affected.add(gid)
            continue
        if not tainted and not everything:
            continue  # before the first rewritten cell: the reference's code on the reference's state
        if everything or nb is None or nb.touched & tainted:
            if gid in tests:
                affected.add(gid)
            if nb is None:
                everything = True
            else:
                tainted |= taint_of(nb)
    return affected
