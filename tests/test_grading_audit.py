"""Issue 19 class 6: an audit of every hidden test of every assignment (any folder of
``solutions/``, so a new assignment is covered as soon as it exists).

Three patterns that leak or trust:

1. **a message that reveals an expected value** - a hidden check whose failure message would
   show a fixed answer (``assert_equal(..., show_expected=True)`` in a hidden region, or a
   message that formats the literal answer of a short-answer question);
2. **evidence from a learner-editable object** - a test cell that reads an attribute of an
   object built from a helper class the notebook gives the learner (a class defined in a cell
   that is neither a solution nor a test cell, such as lesson 1's assignment's ``ScriptedModel``): the
   learner can edit that class, and their own code runs beside that object;
3. **a property a trivial function satisfies** - every graded function of a solution, replaced
   by an identity (``return`` its first argument) or by zeros, must fail every test that calls
   it directly unless ``mistakes.py`` lists that test in the replacement's ``may_fail``; and each
   trivial function that *a property test* could pass is listed in ``mistakes.py`` (the
   fairness tests then see it).

1 and 2 read the notebooks (fast tier); 3 runs them in-process through the fairness harness
(slow tier).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from course_tools.grading_dev.generate import list_assignments
from course_tools.grading_dev.testing import load_mistakes, variant

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = list_assignments(ROOT)
_HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def _cells(name: str) -> list[tuple[Path, dict]]:
    return [(nb, c) for nb in sorted((ROOT / "solutions" / name).glob("*.ipynb"))
            for c in json.loads(nb.read_text("utf-8"))["cells"]]


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _is_test(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and bool(_meta(cell).get("grade")) and not _meta(cell).get("solution")


def _hidden_part(src: str) -> str:
    out, inside = [], False
    for line in src.splitlines():
        if _HIDDEN[0] in line:
            inside = True
        elif _HIDDEN[1] in line:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


def _parse(src: str) -> ast.Module | None:
    try:
        return ast.parse("\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return None


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_hidden_messages_reveal_no_expected_value(name):
    problems = []
    for nb, cell in _cells(name):
        if not _is_test(cell):
            continue
        tree = _parse(_hidden_part(_src(cell)))
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "assert_equal":
                for kw in node.keywords:
                    if kw.arg == "show_expected" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        problems.append(f"{nb.name} {_meta(cell).get('grade_id')}: assert_equal(show_expected=...) "
                                        "in a hidden region shows the answer")
            # a bare `assert x == <literal>, f"... {<literal>} ..."`: the message spells the answer
            # (not `abs(a - b) <= tol`: its literal is the tolerance the task states, not an answer)
            tolerance = (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)
                         and isinstance(node.test.left, ast.Call) and getattr(node.test.left.func, "id", "") == "abs"
                         and all(isinstance(op, (ast.Lt, ast.LtE)) for op in node.test.ops))
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and node.msg is not None and not tolerance:
                literals = [c.value for c in node.test.comparators if isinstance(c, ast.Constant)]
                text = ast.unparse(node.msg)
                for lit in literals:
                    if lit is not None and not isinstance(lit, bool) and repr(lit) in text:
                        problems.append(f"{nb.name} {_meta(cell).get('grade_id')}: message shows {lit!r}")
    assert not problems, "\n".join(problems)


def _helper_classes(name: str) -> dict[str, set[str]]:
    """Classes the notebook gives the learner (defined outside solution and test cells) ->
    the attributes their methods set on ``self``."""
    out: dict[str, set[str]] = {}
    for _, cell in _cells(name):
        if cell.get("cell_type") != "code" or _meta(cell).get("solution") or _is_test(cell):
            continue
        tree = _parse(_src(cell))
        for node in tree.body if tree else ():
            if isinstance(node, ast.ClassDef):
                attrs = {t.attr for t in ast.walk(node) if isinstance(t, ast.Attribute)
                         and isinstance(t.value, ast.Name) and t.value.id == "self" and isinstance(t.ctx, ast.Store)}
                out[node.name] = attrs
    return out


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_test_scores_what_a_learner_editable_helper_reports(name):
    helpers = _helper_classes(name)
    problems = []
    for nb, cell in _cells(name):
        if not _is_test(cell) or not helpers:
            continue
        tree = _parse(_src(cell))
        if tree is None:
            continue
        built: dict[str, str] = {}  # variable -> helper class it was built from
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and getattr(node.value.func, "id", None) in helpers:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        built[target.id] = node.value.func.id
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) \
                    and node.value.id in built and node.attr in helpers[built[node.value.id]]:
                problems.append(f"{nb.name} {_meta(cell).get('grade_id')}: reads {node.value.id}.{node.attr}, kept "
                                f"by {built[node.value.id]}, a class the learner can edit")
    assert not problems, "\n".join(problems)


# -- 3. trivial functions ------------------------------------------------------------------------

def _graded_functions(name: str) -> list[tuple[str, str, str]]:
    """(solution cell grade_id, function name, first parameter) of top-level functions
    defined in solution cells."""
    out = []
    for _, cell in _cells(name):
        if cell.get("cell_type") != "code" or not _meta(cell).get("solution"):
            continue
        tree = _parse(_src(cell))
        for node in tree.body if tree else ():
            if isinstance(node, ast.FunctionDef) and node.args.args:
                out.append((str(_meta(cell).get("grade_id")), node.name, node.args.args[0].arg))
    return out


def _trivial_cell(src: str, func: str, arg: str, body: str) -> str:
    """The solution cell with ``func``'s body replaced by ``body`` (other definitions kept)."""
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            node.body = ast.parse(body.format(arg=arg)).body
    return ast.unparse(tree)


TRIVIAL = {"identity": "return {arg}", "zeros": "import torch\nreturn torch.zeros_like(torch.as_tensor({arg}))"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_trivial_functions_earn_no_point_they_are_not_listed_for(name):
    from course_grader.notebook import Assignment
    from course_tools.grading_dev.fairness import outcomes_under_seeds
    assignment = Assignment.load(ROOT / "solutions" / name)
    mistakes = load_mistakes(ROOT / "solutions" / name)
    allowed: dict[str, set[str]] = {}  # function -> tests a listed trivial mistake may pass... none
    for spec in mistakes.values():
        for gid in spec["replace"]:
            allowed.setdefault(gid, set()).update(spec.get("may_fail", []))
    problems = []
    for source in assignment.notebooks.values():
        cells = {str(_meta(c).get("grade_id")): _src(c) for c in json.loads(source.path.read_text("utf-8"))["cells"]}
        tests = {t.grade_id: t.source for t in source.tests}
        for gid, func, arg in _graded_functions(name):
            # the name as a whole word: `stable_masked_softmax(` is no call of `masked_softmax`
            called = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(func)}\s*[(,]")
            callers = [t for t, src in tests.items() if called.search(src)]
            if not callers or gid not in cells:
                continue
            for kind, body in TRIVIAL.items():
                try:
                    cell = _trivial_cell(cells[gid], func, arg, body)
                except SyntaxError:
                    continue
                # only the tests that call it: the others are not looked at
                outcomes = outcomes_under_seeds(source, variant(source.path, replace={gid: cell}), [0],
                                                only=set(callers))
                passed = [t for t in callers if t in outcomes.passed and outcomes.passed[t]]
                if passed:
                    problems.append(f"{name}: {func} -> {kind} passes {passed}")
    assert not problems, "\n".join(problems)


def test_assert_equal_never_shows_a_hidden_expected_value():
    from course_grader import checks
    with pytest.raises(AssertionError) as err:
        checks.assert_equal((2, 8, 32), (2, 8, 64), name="ANSWER_STATE_SHAPE")
    assert "64" not in str(err.value) and "(2, 8, 32)" in str(err.value)
    with pytest.raises(AssertionError) as err:
        checks.assert_equal([0, 1, 0, 1], [0, 0, 1, 1], name="heads", show_expected=True)  # public checks may
    assert "[0, 0, 1, 1]" in str(err.value)


_RELEASED = sorted((ROOT / "exercises").glob("*/*.ipynb")) + sorted((ROOT / "zh" / "exercises").glob("*/*.ipynb")) \
    + sorted((ROOT / "zh-TW" / "exercises").glob("*/*.ipynb"))


def _displayed_value(source: str) -> str | None:
    """The expression a cell would display (its last statement, if an expression that is not a
    call of print or of an ``assert_*`` check, which return None)."""
    body = ast.parse(source).body
    if not body or not isinstance(body[-1], ast.Expr):
        return None
    value = body[-1].value
    name = getattr(getattr(value, "func", None), "id", "") if isinstance(value, ast.Call) else ""
    return None if name.startswith("assert_") or name == "print" else ast.unparse(value)


@pytest.mark.parametrize("notebook", _RELEASED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_released_test_cell_displays_a_value(notebook):
    """nbgrader reads a number a grade cell displays as partial credit: `as_number(x)` left as the
    last line of a public check (its hidden part removed at release) made Validate crash with
    "partial credit cannot be greater than maximum points" and would score the learner's answer."""
    assert len(_RELEASED) >= 20
    found = [(i, expr) for i, c in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"], start=1)
             if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")
             and (expr := _displayed_value("".join(c["source"])))]
    assert not found, f"grade cells whose last line displays a value (assign it to _): {found}"


def test_the_display_rule_catches_a_bare_expression():
    assert _displayed_value('x = 1\nas_number(ANSWER, name="A")') == "as_number(ANSWER, name='A')"
    assert _displayed_value('_ = as_number(ANSWER, name="A")') is None
    assert _displayed_value('assert_number(ANSWER, 4, name="A")') is None
