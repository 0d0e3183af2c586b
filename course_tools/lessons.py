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
import re
import sys
from pathlib import Path
from typing import Sequence

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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m course_tools.lessons list FOLDER``: the lesson notebooks' file names in FOLDER,
    one a line, in teaching order (the class hub's installer copies these)."""
    parser = argparse.ArgumentParser(prog="python -m course_tools.lessons", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the lesson notebooks of a folder, in teaching order")
    listing.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
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
