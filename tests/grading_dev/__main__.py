"""``python -m grading_dev generate [ASSIGNMENT ...] [--root .] [--release-dir DIR]``."""

from __future__ import annotations

import argparse
import sys

from grading_dev.generate import generate_exercises


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grading_dev",
                                description="Authoring tools of the course's grader (not shipped).")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="regenerate exercises/ from solutions/ with nbgrader")
    g.add_argument("assignments", nargs="*")
    g.add_argument("--root", default=".", help="the course repository (default: the current folder)")
    g.add_argument("--release-dir", default=None)
    args = p.parse_args(argv)
    for path in generate_exercises(args.root, args.release_dir, args.assignments or None):
        print(f"generated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
