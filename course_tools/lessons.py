"""Lesson names: the one place that knows how lesson notebooks are named and ordered.

A lesson notebook is ``notebooks/NN_name.ipynb`` or, for a lesson taught in two parts,
``notebooks/NNa_name.ipynb`` and ``notebooks/NNb_name.ipynb`` (lesson 1 is taught as 1a and
1b, lesson 7 as 7a and 7b). Its **lesson id** is the number without leading zeros plus the
part letter: ``"4"``, ``"1a"``, ``"7b"``. The glossary's lesson column, the README tables
and the prose ("lesson 7b") use these ids; ``lesson_key`` orders them in teaching order
(1a < 1b < 2 < ... < 7a < 7b < 8).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Sequence

from course_grader.notebook import to_python

# A shell/pathlib glob that matches every lesson notebook (and a little more: filter with NAME).
GLOB = "[0-9][0-9]*_*.ipynb"
NAME = re.compile(r"(?P<number>\d\d)(?P<part>[a-z]?)_[A-Za-z0-9_]+\.ipynb")
ID = re.compile(r"(?P<number>[1-9]\d?)(?P<part>[a-z]?)")


def lesson_id(path: Path | str) -> str:
    """``notebooks/07b_training_the_transformer.ipynb`` -> ``"7b"``."""
    name = Path(path).name
    match = NAME.fullmatch(name)
    if not match:
        raise ValueError(f"{name!r} is not a lesson notebook name (NN_name.ipynb or NNa_name.ipynb, "
                         "e.g. 04_bahdanau_attention.ipynb, 07b_training_the_transformer.ipynb)")
    return f"{int(match['number'])}{match['part']}"


def lesson_key(lesson: str) -> tuple[int, str]:
    """Teaching order of a lesson id: ``"1a"`` -> ``(1, "a")``; raises ValueError on anything else."""
    match = ID.fullmatch(lesson.strip())
    if not match:
        raise ValueError(f"{lesson!r} is not a lesson id (a number, with a part letter for a lesson "
                         "taught in parts: 4, 1a, 7b)")
    return int(match["number"]), match["part"]


def lesson_notebooks(folder: Path) -> list[Path]:
    """The lesson notebooks in ``folder``, in teaching order."""
    paths = [p for p in folder.glob(GLOB) if NAME.fullmatch(p.name)]
    return sorted(paths, key=lambda p: lesson_key(lesson_id(p)))


def pinned_threads(path: Path | str) -> int | None:
    """The thread count a notebook fixes for all its computation, or None.

    A notebook fixes it when its first code cell calls ``torch.set_num_threads(N)`` (an integer
    literal, at the cell's top level) and no other cell calls ``set_num_threads``: from there on,
    torch uses N threads whatever ``OMP_NUM_THREADS`` says, so the portability check's thread
    settings would only run the lesson again with the same results (its first cell only imports
    and seeds before the call). A notebook whose code does not parse fixes nothing.
    """
    cells = [c for c in json.loads(Path(path).read_text("utf-8"))["cells"] if c.get("cell_type") == "code"]
    sources = ["".join(c.get("source", [])) for c in cells]
    if not sources or any("set_num_threads" in s for s in sources[1:]):
        return None
    try:
        tree = ast.parse(to_python(sources[0]))
    except SyntaxError:
        return None
    calls = [node.value for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
             and ast.unparse(node.value.func) == "torch.set_num_threads"]
    other = sources[0].count("set_num_threads") - len(calls)
    if len(calls) != 1 or other or len(calls[0].args) != 1 or calls[0].keywords:
        return None
    arg = calls[0].args[0]
    return arg.value if isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value > 0 else None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_tools.lessons list FOLDER``: the lesson notebooks' file names in FOLDER,
    one a line, in teaching order (the class hub's installer copies these)."""
    parser = argparse.ArgumentParser(prog="python -m course_tools.lessons", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the lesson notebooks of a folder, in teaching order")
    listing.add_argument("folder", type=Path)
    unpinned = sub.add_parser("unpinned", help="of these notebooks, those that do not fix torch's thread count "
                              "in their first cell (pinned_threads); the others are named on standard error")
    unpinned.add_argument("notebooks", type=Path, nargs="*")
    args = parser.parse_args(argv)
    if args.command == "unpinned":
        for path in args.notebooks:
            threads = pinned_threads(path)
            if threads is None:
                print(path)
            else:
                print(f"{path}: fixes torch.set_num_threads({threads}) in its first cell", file=sys.stderr)
        return 0
    if not args.folder.is_dir():
        print(f"{args.folder} is not a folder of lesson notebooks (e.g. notebooks, zh/notebooks)", file=sys.stderr)
        return 2
    found = lesson_notebooks(args.folder)
    if not found:
        print(f"{args.folder} holds no lesson notebook (NN_name.ipynb or NNa_name.ipynb)", file=sys.stderr)
        return 1
    print("\n".join(p.name for p in found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
