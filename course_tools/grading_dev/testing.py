"""Helpers to build learner notebooks for grader tests and benchmarks.

Typical use (see tests/test_grading_assignments.py)::

    nb = variant(solution_path, replace={"masked_softmax": WRONG_SOURCE})
    write_notebook(nb, tmp_path / "alice" / "scoring.ipynb")

``solutions/<assignment>/mistakes.py`` lists typical mistakes as
``MISTAKES = {name: {"replace": {grade_id: source}, "fails": [test ids], "may_fail": [...]}}``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

__all__ = ["variant", "write_notebook", "load_mistakes", "trivial_mistakes", "written_cell", "written_assignment",
           "RUBRIC"]


def variant(source: str | Path | dict, *, replace: dict[str, str] | None = None,
            append: dict[str, str] | None = None, drop: list[str] | None = None,
            strip_metadata: bool = False) -> dict:
    """A copy of a notebook with some cells changed (cells named by nbgrader grade_id).

    Args:
        source: a notebook path or a notebook dict.
        replace: grade_id -> new source of that cell.
        append: grade_id -> code appended to that cell.
        drop: grade_ids of cells to delete.
        strip_metadata: remove all cell metadata (as some editors do).
    """
    nb = copy.deepcopy(source) if isinstance(source, dict) else json.loads(Path(source).read_text("utf-8"))
    replace, append = replace or {}, append or {}
    dropped = set(drop or [])
    known: set[str | None] = set()
    cells = []
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        known.add(gid)
        if gid in dropped:
            continue
        if gid in replace:
            cell["source"] = replace[gid].strip("\n")
        if gid in append:
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            cell["source"] = src + "\n" + append[gid].strip("\n")
        if strip_metadata:
            cell["metadata"] = {}
        cells.append(cell)
    missing = (set(replace) | set(append) | dropped) - known
    if missing:
        raise KeyError(f"no cell with grade_id {sorted(missing)}")
    nb["cells"] = cells
    return nb


def write_notebook(nb: dict, path: str | Path) -> Path:
    """Write a notebook dict as JSON, creating folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_mistakes(assignment_dir: str | Path) -> dict[str, Any]:
    """``MISTAKES`` from ``<assignment_dir>/mistakes.py`` ({} if there is none)."""
    path = Path(assignment_dir) / "mistakes.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"_mistakes_{Path(assignment_dir).name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(getattr(module, "MISTAKES", {}))


def solution_editor(notebook: str | Path) -> Callable[..., dict[str, str]]:
    """For a ``mistakes.py``: ``edit(grade_id, (old, new), ...)`` returns ``{grade_id: source}``,
    the solution cell with each ``old`` (which must occur exactly once, so that a change to the
    solution cannot silently turn a mistake into a copy of it) replaced by ``new``."""
    sources = {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"])
               for cell in json.loads(Path(notebook).read_text("utf-8"))["cells"]
               if "nbgrader" in cell.get("metadata", {})}

    def edit(grade_id: str, *changes: tuple[str, str]) -> dict[str, str]:
        source = sources[grade_id]
        for old, new in changes:
            if source.count(old) != 1:
                raise ValueError(f"mistakes.py: {old!r} must occur exactly once in the solution cell {grade_id!r}")
            source = source.replace(old, new)
        return {grade_id: source}

    return edit


#: The trivial functions every graded function is tried as (issue 29): a test that gives one of
#: them a point pays for code that computes nothing. ``input`` variants return something made
#: from the first argument (for a class: an empty module, no parameters, whose forward does it);
#: ``output`` variants run the solution and blank what it returns, keeping its shapes, dtypes,
#: buffers and attributes (a decoder whose attention is right but whose logits are zeros).
TRIVIAL_INPUT = {"identity": "x", "sign_flip": "-x", "zeros": "0 * x", "constant": "x * 0 + 1", "none": "None"}
TRIVIAL_OUTPUT = {"zeros_out": 0, "constant_out": 1}

_BLANK = '''
def _trivial_blank(value, fill):
    import torch
    if isinstance(value, torch.Tensor):
        return torch.full_like(value, fill)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return type(value)(fill)
    if isinstance(value, (list, tuple)):
        return type(value)(_trivial_blank(v, fill) for v in value)
    return value
'''


def _trivial_sources(cell_source: str, name: str, is_class: bool, node: "Any") -> dict[str, str]:
    lines = cell_source.split("\n")
    start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
    before, after = "\n".join(lines[:start]), "\n".join(lines[node.end_lineno:])
    definition = "\n".join(lines[start:node.end_lineno])
    out: dict[str, str] = {}
    for kind, expr in TRIVIAL_INPUT.items():
        first = "x = args[0] if args else next(iter(kwargs.values()))\n"
        if is_class:
            body = (f"class {name}(nn.Module):\n    def __init__(self, *args, **kwargs):\n        super().__init__()\n\n"
                    f"    def forward(self, *args, **kwargs):\n        {first}        return {expr}")
        else:
            body = f"def {name}(*args, **kwargs):\n    {first}    return {expr}"
        out[kind] = f"{before}\n{body}\n{after}"
    for kind, fill in TRIVIAL_OUTPUT.items():
        if is_class:
            wrap = (f"class {name}({name}):\n    def forward(self, *args, **kwargs):\n"
                    f"        return _trivial_blank(super().forward(*args, **kwargs), {fill})")
        else:
            wrap = (f"_trivial_solution_{name} = {name}\n\ndef {name}(*args, **kwargs):\n"
                    f"    return _trivial_blank(_trivial_solution_{name}(*args, **kwargs), {fill})")
        # The wrap goes right after the definition, not after the cell: the rest of the cell (an
        # experiment's ``ANSWER_ = f(...)`` lines, a class built on the function) must see the
        # trivial version, as it would if the learner had written it.
        out[kind] = f"{before}\n{definition}\n{_BLANK}\n{wrap}\n{after}"
    return out


def trivial_mistakes(notebook: str | Path, *, fails: dict[str, list[str]] | None = None,
                     skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """For ``mistakes.py``: every trivial function (:data:`TRIVIAL_INPUT`, :data:`TRIVIAL_OUTPUT`) in
    place of every function and class that a solution cell of ``notebook`` defines.

    Each must fail every test cell between its solution cell and the next one (``fails``
    overrides that list per function name), and may fail any later test (they call it).

    Args:
        notebook: the source notebook.
        fails: function name -> the tests a trivial version must fail (default: the cell's tests).
        skip: function names left out (helpers no test calls on their own, with the reason in
            the caller's comment).
    """
    import ast
    cells = json.loads(Path(notebook).read_text("utf-8"))["cells"]
    out: dict[str, Any] = {}
    for i, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("solution") or cell.get("cell_type") != "code":
            continue
        group: list[str] = []
        later: list[str] = []
        ended = False
        for other in cells[i + 1:]:
            m = other.get("metadata", {}).get("nbgrader", {})
            ended = ended or bool(m.get("solution"))
            if m.get("grade") and not m.get("solution"):
                (later if ended else group).append(m["grade_id"])
        source = "".join(cell["source"])
        for node in ast.parse(source).body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name in skip:
                continue
            for kind, text in _trivial_sources(source, node.name, isinstance(node, ast.ClassDef), node).items():
                out[f"trivial_{node.name}_{kind}"] = {
                    "replace": {meta["grade_id"]: text}, "trivial": True,
                    "fails": list((fails or {}).get(node.name, group)), "may_fail": later}
    return out


#: The mark scheme of :func:`written_assignment`'s written cell: no line of it may be released.
RUBRIC = "Model answer: the dot products grow like sqrt(d), so the softmax saturates. (2 points: cause; 1: effect)"


def written_cell(grade_id: str = "written_why", points: float = 3, *, question: str = "Explain why.",
                 rubric: str = RUBRIC, model: str = "The variance of q.k grows with d.") -> dict:
    """A written-analysis cell as an instructor writes it: nbgrader's manually graded answer
    (markdown, ``grade`` and ``solution``), the question, the mark scheme between
    ``=== BEGIN MARK SCHEME ===`` and ``=== END MARK SCHEME ===``, and the model answer in a
    solution region (the learner gets "YOUR ANSWER HERE" in its place)."""
    source = (f"{question}\n\n=== BEGIN MARK SCHEME ===\n{rubric}\n=== END MARK SCHEME ===\n\n"
              f"### BEGIN SOLUTION\n{model}\n### END SOLUTION")
    return {"cell_type": "markdown", "id": grade_id.replace("_", "-"), "source": source, "metadata": {"nbgrader": {
        "grade": True, "solution": True, "locked": False, "points": points, "grade_id": grade_id,
        "schema_version": 3}}}


def written_assignment(folder: str | Path, name: str = "essay", *, language: str | None = None,
                       question: str = "Explain why.") -> Path:
    """A small assignment with one written cell, for tests: ``<folder>/<name>/essay.ipynb`` with a
    solution cell ``double`` (2 * x), a 2-point test ``test_double`` and a 3-point written cell
    ``written_why`` (:func:`written_cell`). ``language``: the notebook's (``"zh-CN"`` for the
    Chinese edition). Returns the assignment folder."""
    def meta(**k: Any) -> dict:
        return {"nbgrader": {"schema_version": 3, "locked": False, **k}}

    def code(cid: str, source: str, **k: Any) -> dict:
        return {"cell_type": "code", "id": cid, "source": source, "metadata": meta(**k), "outputs": [],
                "execution_count": None}

    cells = [{"cell_type": "markdown", "id": "title", "source": "# Essay", "metadata": {}},
             code("double", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION",
                  grade=False, solution=True, grade_id="double"),
             code("test-double", "assert double(2) == 4\nassert double(-3) == -6", grade=True, solution=False,
                  locked=True, points=2, grade_id="test_double"),
             written_cell(question=question)]
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                       "language_info": {"name": "python"}, **({"language": language} if language else {})}}
    target = Path(folder) / name
    write_notebook(nb, target / "essay.ipynb")
    return target
