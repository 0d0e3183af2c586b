"""What an assignment is worth and where its cells are, read from the instructor's notebook, so
that a grader test states its expectations in terms of the assignment rather than hard-coding
one edition of it (issue 30: the second edition of lesson 3 went from 15 to 24 + 2 points and
broke every test that had written ``15`` or a cell index).

Typical use::

    pts = assignment_points("lesson03_scoring")
    assert total("honest") == pts.auto                  # full marks: every auto-graded point
    assert row["max"] == fmt(pts.maximum)               # the maximum counts the written cells too
    assert total("nosqrt") == pts.auto - pts.sum(MISTAKES["missing_sqrt"]["fails"])
    index = cell_index(nb, grade_id="answers")           # not nb["cells"][17]
    index = cell_index(nb, defines="DotProductAttention")

The numbers are read straight from the nbgrader metadata (``grade``, ``solution``, ``points``,
``grade_id``) with nothing of the grader's own code, so that a test comparing the grader's
output with them still fails when the grader reads a notebook wrongly.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

__all__ = ["AssignmentPoints", "assignment_points", "cell_index", "cell_source", "fmt", "dependent_tests", "SOLUTIONS"]

#: The instructor's source folder of the course this package belongs to.
SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"


def fmt(points: float) -> str:
    """A number of points as the gradebooks write it (``15``, ``13.5``; never ``15.0``)."""
    return f"{points:g}"


def _meta(cell: dict) -> dict:
    meta = cell.get("metadata")
    nbg = meta.get("nbgrader") if isinstance(meta, dict) else None
    return nbg if isinstance(nbg, dict) else {}


def cell_source(cell: dict) -> str:
    """A cell's source as one string (notebooks store either a string or a list of lines)."""
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def _points(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: points {value!r} is not a number: give the cell a number of points "
                         "in its nbgrader metadata")
    return float(value)


@dataclass(frozen=True)
class AssignmentPoints:
    """The points of one assignment, from its instructor notebook(s).

    ``tests``: grade id -> points of each auto-graded test cell (``grade`` without ``solution``),
    in notebook order; ``written``: grade id -> points of each hand-graded written cell
    (``grade`` and ``solution``). With several notebooks, ids are ``notebook:grade_id`` as in the
    gradebook's columns.
    """

    name: str
    notebooks: tuple[Path, ...]
    tests: dict[str, float] = field(default_factory=dict)
    written: dict[str, float] = field(default_factory=dict)
    #: grade id -> what a learner's self-check can run of the test: ``"public"`` (no hidden
    #: part), ``"public+hidden"`` (a public part, then hidden tests), ``"hidden"`` (hidden only)
    kinds: dict[str, str] = field(default_factory=dict)

    @property
    def auto(self) -> float:
        """Full marks from the grader: every auto-graded point."""
        return sum(self.tests.values())

    @property
    def manual(self) -> float:
        """The points graded by hand in Formgrader (the written cells)."""
        return sum(self.written.values())

    @property
    def maximum(self) -> float:
        """The assignment's maximum (``max`` in the gradebook): auto-graded and written points."""
        return self.auto + self.manual

    @property
    def columns(self) -> list[str]:
        """The gradebook's score columns: the tests, then the written cells."""
        return [*self.tests, *self.written]

    def of_kind(self, *kinds: str) -> list[str]:
        """The tests of these kinds (:attr:`kinds`), in notebook order."""
        return [g for g in self.tests if self.kinds[g] in kinds]

    def sum(self, grade_ids: Iterable[str]) -> float:
        """The points of these test or written cells; an unknown id is an error (a renamed test
        must not silently count as 0)."""
        ids = list(grade_ids)
        unknown = [g for g in ids if g not in self.tests and g not in self.written]
        if unknown:
            raise KeyError(f"{self.name}: no graded cell {unknown}; its graded cells are {self.columns}")
        return sum(self.tests.get(g, self.written.get(g, 0.0)) for g in ids)

    def without(self, grade_ids: Iterable[str]) -> float:
        """The auto-graded total of a submission that fails exactly these tests."""
        return self.auto - self.sum(grade_ids)


def _notebooks(assignment: str | Path) -> tuple[str, list[Path]]:
    path = Path(assignment)
    if not path.is_absolute() and not path.exists():
        path = SOLUTIONS / path
    if path.is_file():
        return path.parent.name, [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no assignment {assignment!r}: give a folder name under {SOLUTIONS} "
                                "(e.g. 'lesson03_scoring') or the path of an instructor notebook")
    nbs = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
    if not nbs:
        raise FileNotFoundError(f"no instructor notebook (.ipynb) in {path}")
    return path.name, nbs


def assignment_points(assignment: str | Path) -> AssignmentPoints:
    """The points of an assignment: a folder name under ``solutions/`` (``"lesson03_scoring"``),
    an assignment folder, or one instructor notebook."""
    name, nbs = _notebooks(assignment)
    tests: dict[str, float] = {}
    written: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for nb_path in nbs:
        prefix = f"{nb_path.stem}:" if len(nbs) > 1 else ""
        for i, cell in enumerate(json.loads(nb_path.read_text("utf-8"))["cells"]):
            meta = _meta(cell)
            if not meta.get("grade"):
                continue
            gid = meta.get("grade_id") or f"cell-{i}"
            where = f"{nb_path.name}, cell {i} ({gid})"
            key = prefix + gid
            if key in tests or key in written:
                raise ValueError(f"{where}: duplicate grade_id {gid!r}")
            if meta.get("solution"):
                if cell.get("cell_type") in ("markdown", "code"):
                    written[key] = _points(meta.get("points"), where)
            elif cell.get("cell_type") == "code":
                tests[key] = _points(meta.get("points", 0) or 0, where)
                kinds[key] = _kind(cell_source(cell))
    return AssignmentPoints(name, tuple(nbs), tests, written, kinds)


def _kind(source: str) -> str:
    """"public", "public+hidden" or "hidden": whether the test has a hidden region (nbgrader's
    ``BEGIN HIDDEN TESTS``) and whether any statement is left outside it."""
    public: list[str] = []
    hidden, inside = False, False
    for line in source.split("\n"):
        if "BEGIN HIDDEN TESTS" in line:
            hidden, inside = True, True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif not inside:
            public.append(line)
    try:
        has_code = bool(ast.parse("\n".join(public)).body)
    except SyntaxError:
        has_code = True
    if not hidden:
        return "public"
    return "public+hidden" if has_code else "hidden"


def _defines(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
    return names


def cell_index(nb: dict | str | Path, *, grade_id: str | None = None, defines: str | None = None) -> int:
    """The index of the one cell with this nbgrader ``grade_id``, or of the one code cell whose
    top level defines ``defines`` (a function, class or assigned name), in a notebook (a dict
    or a path). Raises ``LookupError`` naming what was looked for when there is none, or more
    than one (a test must not silently act on the wrong cell)."""
    if (grade_id is None) == (defines is None):
        raise TypeError("cell_index: give exactly one of grade_id= or defines=")
    doc: dict = nb if isinstance(nb, dict) else json.loads(Path(nb).read_text("utf-8"))
    if grade_id is not None:
        found = [i for i, c in enumerate(doc["cells"]) if _meta(c).get("grade_id") == grade_id]
        what = f"grade_id {grade_id!r}"
    else:
        found = [i for i, c in enumerate(doc["cells"])
                 if c.get("cell_type") == "code" and defines in _defines(cell_source(c))]
        what = f"a code cell defining {defines!r}"
    if len(found) != 1:
        raise LookupError(f"expected one cell with {what}, found {len(found)}"
                          + (f" (cells {found})" if found else ""))
    return found[0]


def _reads(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def dependent_tests(assignment: str | Path, grade_id: str) -> list[str]:
    """The auto-graded tests (grade ids, notebook order) that read a name the cell ``grade_id``
    defines at its top level: the tests a submission loses when that cell is lost (e.g. a
    sandbox that dies in the ``answers`` cell loses the question tests, whatever their number).
    ``assignment`` as for :func:`assignment_points` (one notebook)."""
    _, nbs = _notebooks(assignment)
    if len(nbs) != 1:
        raise ValueError(f"dependent_tests: {assignment} has {len(nbs)} notebooks; give the path of one")
    nb = json.loads(nbs[0].read_text("utf-8"))
    names = _defines(cell_source(nb["cells"][cell_index(nb, grade_id=grade_id)]))
    if not names:
        raise LookupError(f"the cell {grade_id!r} defines no name at its top level")
    return [str(_meta(c).get("grade_id")) for c in nb["cells"]
            if _meta(c).get("grade") and not _meta(c).get("solution") and c.get("cell_type") == "code"
            and _reads(cell_source(c)) & names]
