"""Reading assignments (instructor source notebooks) and learner submissions.

The instructor's SOURCE notebook in ``solutions/<assignment>/`` is the truth for test
cells, their points and their hidden parts. A learner's notebook only contributes its
code cells; its copies of test cells are recognised (by nbgrader ``grade_id``, or by
content when metadata is missing) and ignored.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NotebookError", "TestCell", "WrittenCell", "is_written", "written_answers", "TEST_INFO_KEY", "cell_test_info", "SourceNotebook", "Assignment", "Step", "load_notebook_json", "load_notebook_bytes",
           "release_source", "to_python", "plan_submission", "scan_imports"]

_BEGIN_SOLUTION, _END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
_BEGIN_HIDDEN, _END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]


class NotebookError(Exception):
    """A notebook that cannot be read; the message is meant for the learner or teacher."""


def _cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(str(s) for s in src)
    return str(src) if src is not None else ""


def load_notebook_json(path: str | Path) -> dict:
    """Load a notebook as plain JSON with clear errors for broken files.

    Raises:
        NotebookError: unreadable, not JSON (e.g. truncated), or not a notebook.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NotebookError(f"cannot read {path.name}: {exc.strerror}") from None
    return load_notebook_bytes(raw, path.name)


def load_notebook_bytes(raw: bytes, name: str) -> dict:
    """Parse a notebook's bytes (``name`` is for messages); see :func:`load_notebook_json`."""
    if not raw.strip():
        raise NotebookError(f"{name} is empty")
    try:
        nb = json.loads(raw.decode("utf-8", "replace"))
    except RecursionError:
        raise NotebookError(f"{name} is not a valid notebook: its JSON is nested too deeply") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError):  # e.g. an integer of thousands of digits
            raise NotebookError(f"{name} is not a valid notebook: {str(exc)[:200]}") from None
        truncated = "" if raw.rstrip().endswith(b"}") else " (the file looks truncated)"
        raise NotebookError(f"{name} is not valid notebook JSON{truncated}: {exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno}. Re-save the notebook from Jupyter, or restore it from a "
                            "checkpoint.") from None
    _check_shape(nb, name)
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError(f"{name} is JSON but not a Jupyter notebook (no list of cells)")
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or "cell_type" not in cell:
            raise NotebookError(f"{name}: cell {i} is malformed (no cell_type)")
    return nb


from course_grader import policy  # noqa: E402 - the caps are policy's

#: Deepest nesting of JSON values accepted in a notebook (real notebooks stay below 20).
MAX_JSON_DEPTH = policy.MAX_JSON_DEPTH


def _check_shape(value: Any, name: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH` (walked without recursion, so
    nothing later recurses through a learner's deep structure)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise NotebookError(f"{name} is not a valid notebook: its JSON is nested more than "
                                f"{MAX_JSON_DEPTH} levels deep")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _nbgrader_meta(cell: dict) -> dict:
    meta = cell.get("metadata")
    if not isinstance(meta, dict):
        return {}
    nbg = meta.get("nbgrader")
    return nbg if isinstance(nbg, dict) else {}


#: The key, in a test cell's metadata, of what the learner is told about the test:
#: ``{"description": "one line", "lesson": "3", "section": 2}`` (issue 30). The generator
#: carries cell metadata into the released notebook, and the grader into each result.
TEST_INFO_KEY = "course"
#: The longest description kept (a longer one is cut): one line of a report.
MAX_DESCRIPTION = 300
_LESSON = re.compile(r"[0-9]{1,2}[ab]?")


def cell_test_info(cell: dict) -> dict:
    """A test cell's learner-facing description and the lesson section it practises, as
    keyword arguments of :class:`TestCell` and :class:`course_grader.results.TestOutcome`.

    Read from ``metadata.course`` (:data:`TEST_INFO_KEY`); a value of the wrong type or form
    is left out rather than trusted (the self-check reads a learner's copy of the notebook):
    the description must be a string (cut to one line of :data:`MAX_DESCRIPTION`
    characters), the lesson a lesson number such as ``"3"`` or ``"7a"``, the section an
    integer from 1 to 99.
    """
    meta = cell.get("metadata")
    info = meta.get(TEST_INFO_KEY) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return {}
    out: dict = {}
    text = info.get("description")
    if isinstance(text, str) and text.strip():
        out["description"] = " ".join(text.split())[:MAX_DESCRIPTION]
    lesson, section = info.get("lesson"), info.get("section")
    if (isinstance(lesson, str) and _LESSON.fullmatch(lesson) and type(section) is int and 1 <= section <= 99):
        out["lesson"], out["section"] = lesson, section
    return out


def release_source(source: str, *, solution: bool, test: bool) -> str:
    """The learner's version of a cell: solutions replaced by a stub, hidden tests removed.

    Line for line what nbgrader's ``ClearSolutions`` and ``ClearHiddenTests`` do (a test checks
    them against each other on every cell of the course), errors included: a region that is
    nested or never closed is refused, never silently cut. nbgrader itself is not imported
    here: it costs 3.4 s of CPU (twice torch's import) in every grading process.

    Raises:
        NotebookError: a region nested in another, or without its END line.
    """
    lines = source.split("\n")
    if solution:
        lines = _clear_region(lines, _BEGIN_SOLUTION, _END_SOLUTION, _STUB)
    if test:
        lines = _clear_region(lines, _BEGIN_HIDDEN, _END_HIDDEN, [])
    return "\n".join(lines)


def _clear_region(lines: list[str], begin: str, end: str, stub: list[str]) -> list[str]:
    out: list[str] = []
    inside = False
    for line in lines:
        if begin in line:
            if inside:
                raise NotebookError(f"a \"{begin}\" region inside another: close the first with \"{end}\"")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(indent + s for s in stub)
        elif end in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise NotebookError(f"a \"{begin}\" region has no \"{end}\" line")
    return out


def hidden_lines(source: str) -> set[int]:
    """1-based line numbers inside hidden-test regions (markers included)."""
    hidden: set[int] = set()
    inside = False
    for no, line in enumerate(source.split("\n"), start=1):
        if _BEGIN_HIDDEN in line:
            inside = True
        if inside:
            hidden.add(no)
        if _END_HIDDEN in line:
            inside = False
    return hidden


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def to_python(source: str) -> str:
    """Turn IPython cell syntax (magics, ``!shell``) into plain Python."""
    if "%" not in source and "!" not in source and "?" not in source:
        return source
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - leave it; the sandbox reports the SyntaxError
        return source


@dataclass
class TestCell:
    """An autograded test cell of the source notebook."""

    grade_id: str
    points: float
    source: str
    release_source: str
    hidden_lines: set[int]
    index: int
    #: what the learner is told about the test (:func:`cell_test_info`): one line, and the lesson
    #: section it practises ("" and 0 when the source notebook does not say)
    description: str = ""
    lesson: str = ""
    section: int = 0

    @property
    def has_hidden(self) -> bool:
        return bool(self.hidden_lines)

    def info(self) -> dict:
        """The description and section as keyword arguments of a TestOutcome."""
        return {"description": self.description, "lesson": self.lesson, "section": self.section}


def is_written(cell: dict) -> bool:
    """A written-analysis cell: nbgrader's "manually graded answer", a cell with ``grade`` and
    ``solution`` both true (markdown, or code graded by reading it), graded by the teacher in
    Formgrader, never by course-grade."""
    meta = _nbgrader_meta(cell)
    return bool(meta.get("grade")) and bool(meta.get("solution")) and cell.get("cell_type") in ("markdown", "code")


#: nbgrader's default text of a released markdown answer cell (ClearSolutions.text_stub).
ANSWER_STUB = "YOUR ANSWER HERE"


@dataclass
class WrittenCell:
    """A written-analysis cell of the source notebook (:func:`is_written`): its points count in
    the maximum, the teacher grades it by hand against the mark scheme (the region between
    ``BEGIN MARK SCHEME`` and ``END MARK SCHEME``, which nbgrader's ClearMarkScheme removes
    from the release)."""

    grade_id: str
    points: float
    index: int
    cell_type: str = "markdown"
    #: the cell as released to learners (:func:`released_written`): an answer equal to it is no answer
    released: str = ANSWER_STUB


def released_written(source: str) -> str:
    """The learner's copy of a written cell, as nbgrader's ClearSolutions and ClearMarkScheme make
    it: the mark scheme removed; a ``BEGIN SOLUTION`` region replaced by :data:`ANSWER_STUB`, or,
    with no region, the whole cell."""
    lines: list[str] = []
    scheme = solution = found = False
    for line in source.split("\n"):
        if "BEGIN MARK SCHEME" in line:
            scheme = True
        elif "END MARK SCHEME" in line:
            scheme = False
        elif scheme:
            continue
        elif _BEGIN_SOLUTION in line:
            solution = found = True
            lines.append(line[: len(line) - len(line.lstrip())] + ANSWER_STUB)
        elif _END_SOLUTION in line:
            solution = False
        elif not solution:
            lines.append(line)
    return "\n".join(lines) if found else ANSWER_STUB


def _words(text: str) -> str:
    return " ".join(text.split())


def written_answers(written: list[WrittenCell], learner: dict, column_prefix: str = "") -> list:
    """The learner's answers to the written cells, as :class:`course_grader.results.WrittenAnswer`
    (no score; bounded and escaped by :func:`course_grader.sinks.answer_text`). A learner cell
    is matched by its nbgrader ``grade_id``; a missing, empty or unchanged one is not answered,
    and worth 0 (nbgrader's autograde rule for an unchanged answer cell)."""
    from course_grader.results import NO_ANSWER, WrittenAnswer
    from course_grader.sinks import answer_text
    found: dict[str, str] = {}
    for cell in learner.get("cells", []) if isinstance(learner, dict) else []:
        if not isinstance(cell, dict):
            continue
        gid = _nbgrader_meta(cell).get("grade_id")
        if isinstance(gid, str) and gid not in found:
            found[gid] = _cell_source(cell)
    out = []
    for w in written:
        text = found.get(w.grade_id, "")
        answered = _words(text) not in ("", ANSWER_STUB, _words(w.released))
        answer = WrittenAnswer(w.grade_id, column_prefix + w.grade_id, w.points, answer_text(text), answered)
        if not answered:
            answer = dataclasses.replace(answer, points=0.0, status=NO_ANSWER)
        out.append(answer)
    return out


@dataclass
class SourceNotebook:
    """The instructor's source notebook of an assignment."""

    name: str
    path: Path
    cells: list[dict]
    tests: list[TestCell]
    trusted_imports: str
    #: the written-analysis cells, graded by hand (:class:`WrittenCell`)
    written: list[WrittenCell] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> "SourceNotebook":
        path = Path(path)
        nb = load_notebook_json(path)
        tests: list[TestCell] = []
        written: list[WrittenCell] = []
        imports: list[str] = []
        seen: set[str] = set()
        for i, cell in enumerate(nb["cells"]):
            meta = _nbgrader_meta(cell)
            src = _cell_source(cell)
            if is_written(cell):
                gid = meta.get("grade_id")
                points = meta.get("points")
                if not isinstance(gid, str) or not gid.strip():
                    raise NotebookError(f"{path.name}: cell {i + 1} is a written answer (nbgrader grade and solution) "
                                        "without a grade_id: give it one, e.g. \"written_<topic>\"")
                if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points < 1e6:
                    raise NotebookError(f"{path.name}: written cell {gid!r} has points {points!r}: give it a positive "
                                        "number of points in its nbgrader metadata")
                if gid in seen:
                    raise NotebookError(f"{path.name}: duplicate grade_id {gid!r}")
                seen.add(gid)
                written.append(WrittenCell(gid, float(points), i, str(cell.get("cell_type")), released_written(src)))
            if cell.get("cell_type") != "code":
                continue
            is_test = bool(meta.get("grade")) and not meta.get("solution")
            try:
                released = release_source(src, solution=bool(meta.get("solution")), test=is_test)
            except NotebookError as exc:
                raise NotebookError(f"{path.name}: cell {i + 1} ({meta.get('grade_id', 'no grade_id')}): {exc}") from None
            if is_test:
                gid = str(meta.get("grade_id") or f"cell-{i}")
                if gid in seen:
                    raise NotebookError(f"{path.name}: duplicate grade_id {gid!r}")
                seen.add(gid)
                tests.append(TestCell(gid, float(meta.get("points", 0) or 0), src, released, hidden_lines(src), i,
                                      **cell_test_info(cell)))
                continue
            # the imports of plain Python lines only: IPython's transformer is quadratic in the
            # cell's magics, and this also reads a self-checked learner's notebook
            plain = "\n".join(line for line in released.split("\n") if not line.lstrip().startswith(("%", "!")))
            try:
                tree = ast.parse(plain)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for node in tree.body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    imports.append(ast.unparse(node))
        return cls(path.stem, path, nb["cells"], tests, "\n".join(imports), written)

    @property
    def max_points(self) -> float:
        """Every point of the notebook: its tests' and its written answers' (graded by hand)."""
        return sum(t.points for t in self.tests) + sum(w.points for w in self.written)


@dataclass
class Assignment:
    """An assignment: a folder of source notebooks under ``solutions/``."""

    name: str
    directory: Path
    notebooks: dict[str, SourceNotebook]
    origin: Path | None = None  # the path it was loaded from

    @classmethod
    def load(cls, path: str | Path) -> "Assignment":
        """Load ``solutions/<name>`` (a folder) or a single source ``.ipynb``."""
        path = Path(path)
        if path.is_file():
            nbs = [path]
            directory = path.parent
        elif path.is_dir():
            nbs = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
            directory = path
        else:
            raise NotebookError(f"no assignment at {path}")
        if not nbs:
            raise NotebookError(f"no source notebook (.ipynb) in {path}")
        return cls(directory.name, directory, {p.stem: SourceNotebook.load(p) for p in nbs}, path)

    @property
    def columns(self) -> list[str]:
        """Gradebook columns, one per test cell then one per written cell (prefixed by notebook
        when there are several)."""
        multi = len(self.notebooks) > 1
        return [f"{nb}:{gid}" if multi else gid for nb, src in self.notebooks.items()
                for gid in [t.grade_id for t in src.tests] + [w.grade_id for w in src.written]]

    @property
    def max_points(self) -> float:
        return sum(nb.max_points for nb in self.notebooks.values())

    @property
    def written_columns(self) -> list[str]:
        """The gradebook columns of the written answers (graded by hand)."""
        multi = len(self.notebooks) > 1
        return [f"{nb}:{w.grade_id}" if multi else w.grade_id for nb, src in self.notebooks.items() for w in src.written]


@dataclass
class Step:
    """One step of grading: run a learner cell in the sandbox, or a test in the grader."""

    kind: str  # "learner" | "test"
    index: int  # cell index in the learner's notebook (-1 for an inserted test)
    source: str = ""
    test: TestCell | None = None


@dataclass
class Plan:
    steps: list[Step]
    notes: list[str] = field(default_factory=list)


def plan_submission(source: SourceNotebook, learner: dict) -> Plan:
    """Order learner cells and (the source's) test cells for one submission.

    Learner copies of test cells are matched by ``grade_id``, or by content when the
    metadata is missing, and replaced by the source version. Tests the learner deleted
    are still run, after the learner cell matching the source cell before them.
    """
    by_id = {t.grade_id: t for t in source.tests}
    by_content: dict[str, TestCell] = {}
    for t in source.tests:
        by_content.setdefault(_normalise(t.release_source), t)
        by_content.setdefault(_normalise(t.source), t)
    steps: list[Step] = []
    notes: list[str] = []
    seen_tests: set[str] = set()
    learner_ids: dict[str, int] = {}
    for i, cell in enumerate(learner["cells"]):
        if cell.get("cell_type") != "code":
            continue
        src = _cell_source(cell)
        gid = _nbgrader_meta(cell).get("grade_id")
        test = by_id.get(gid) if isinstance(gid, str) else None
        matched_by = "id"
        if test is None and not (isinstance(gid, str) and gid):
            test = by_content.get(_normalise(src)) if src.strip() else None
            matched_by = "content"
        if isinstance(gid, str):
            learner_ids.setdefault(gid, len(steps))
        if test is not None:
            if test.grade_id in seen_tests:
                notes.append(f"Test cell {test.grade_id!r} appears more than once in your notebook; "
                             "only the first copy counts.")
                continue
            seen_tests.add(test.grade_id)
            if _normalise(src) not in (_normalise(test.release_source), _normalise(test.source)):
                notes.append(f"Test cell {test.grade_id!r} was modified in your notebook; the original test "
                             "was run instead.")
            elif matched_by == "content":
                notes.append(f"Test cell {test.grade_id!r} had lost its nbgrader metadata; it was recognised "
                             "by its content.")
            learner_ids.setdefault(test.grade_id, len(steps))
            steps.append(Step("test", i, test=test))
            continue
        steps.append(Step("learner", i, src))
    # tests the learner deleted: insert after the step matching the closest earlier source cell
    for t in source.tests:
        if t.grade_id in seen_tests:
            continue
        notes.append(f"Test cell {t.grade_id!r} is missing from your notebook; the original test was run.")
        pos = len(steps)
        for cell in reversed(source.cells[: t.index]):
            gid = _nbgrader_meta(cell).get("grade_id")
            if isinstance(gid, str) and gid in learner_ids:
                anchor = learner_ids[gid]
                pos = anchor + 1
                while pos < len(steps) and steps[pos].kind == "test" and steps[pos].index == -1:
                    pos += 1
                break
        steps.insert(pos, Step("test", -1, test=t))
        for k, v in list(learner_ids.items()):
            if v >= pos:
                learner_ids[k] = v + 1
        learner_ids[t.grade_id] = pos
    return Plan(steps, notes)


def scan_imports(sources: list[str], *, allowed: tuple[str, ...] = ()) -> list[str]:
    """Names of ``course_lib`` modules imported by learner code (the reference answers).

    The grader checks behaviour, not provenance: this only produces a note.
    """
    found: list[str] = []
    for src in sources:
        try:
            tree = ast.parse(to_python(src))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = ([f"course_lib.{a.name}" for a in node.names] if node.module == "course_lib"
                         else [node.module])
            for n in names:
                if (n == "course_lib" or n.startswith("course_lib.")) and not (allowed and n.startswith(allowed)):
                    if n not in found:
                        found.append(n)
    return found
