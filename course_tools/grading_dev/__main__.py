"""``python -m course_tools.grading_dev generate [ASSIGNMENT ...] [--root .] [--edition en|zh-CN|zh-TW]``;
``python -m course_tools.grading_dev coverage [--root .]`` (public share of code points, time estimates)."""

from __future__ import annotations

import argparse
import sys

from course_tools.grading_dev.generate import EDITIONS, generate_editions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_tools.grading_dev",
                                description="Authoring tools of the course's grader (not shipped).")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="regenerate exercises/ from solutions/ (and zh/exercises/ from "
                                        "zh/solutions/ when it exists) with nbgrader")
    g.add_argument("assignments", nargs="*")
    g.add_argument("--root", default=".", help="the course repository (default: the current folder)")
    g.add_argument("--edition", action="append", choices=list(EDITIONS),
                   help="only this edition (repeatable; default: every edition whose sources exist)")
    c = sub.add_parser("coverage", help="per assignment: code points with a public check, and the time estimate")
    c.add_argument("--root", default=".", help="the course repository (default: the current folder)")
    args = p.parse_args(argv)
    if args.command == "coverage":
        from course_tools.grading_dev.coverage import format_table, table
        print(format_table(table(args.root)))
        return 0
    for path in generate_editions(args.root, args.assignments or None, args.edition):
        print(f"generated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
