"""Create an nbgrader course directory from this repository and release its assignments.

Run it with the course environment's Python, as the instructor (or as root with
``--owner``, which creates the folder for that user and runs nbgrader as them)::

    /opt/attention-course/venv/bin/python deploy/make_course.py ~/course --release
    sudo /opt/attention-course/venv/bin/python deploy/make_course.py /home/teacher/course \\
        --owner teacher --assignments lesson03_scoring --students alice bob carol --release
    /opt/attention-course/venv/bin/python deploy/make_course.py ~/course --language zh-CN --release

``--language zh-CN`` (default ``$COURSE_LANGUAGE``, else ``en``) makes a Chinese course: its
sources are the Chinese edition's ``zh/solutions/<assignment>/`` (same code and tests as the
English ones, so the grade is the same), released in Chinese (course_tools/course_language.py).

It builds nbgrader's standard layout::

    COURSE_DIR/nbgrader_config.py     `course-grade init-course`'s settings + the exchange
    COURSE_DIR/source/<assignment>/   copied from solutions/<assignment>/ (zh/solutions/ in Chinese)
    COURSE_DIR/release/<assignment>/  nbgrader generate_assignment (learner versions)
    COURSE_DIR/gradebook.db           nbgrader's gradebook (assignments, students)

and, with ``--release``, puts each assignment into the exchange (``nbgrader
release_assignment``), where learners fetch it from the Assignment List. The files the
repository's ``nbgrader_config.py`` lists in ``CourseDirectory.ignore`` (``mistakes.py``:
the typical mistakes the grader tests use) stay in ``source/`` and are checked to be absent
from every release. Re-running updates the sources and re-generates; learners' fetched
copies are not touched (re-releasing a changed assignment needs ``--force``, see nbgrader).
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from course_tools import course_language

REPO = Path(__file__).resolve().parents[1]

#: Appended to the course's ``nbgrader_config.py`` (written by ``course-grade init-course``):
#: where the class's exchange is.
EXCHANGE_CONFIG = '''
# The class hub's exchange (deploy/make_course.py); COURSE_EXCHANGE overrides it.
import os  # noqa: E402
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", {exchange!r})
c.Exchange.path_includes_course = False
'''


def repo_ignore_list(repo: Path = REPO) -> list[str]:
    """``CourseDirectory.ignore`` of the repository's ``nbgrader_config.py``.

    Args:
        repo: the course repository.

    Returns:
        The glob patterns of files that are never released.
    """
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(repo)).load_config()
    ignore = list(cfg.CourseDirectory.ignore)
    if "mistakes.py" not in ignore:
        raise SystemExit(f"{repo / 'nbgrader_config.py'}: CourseDirectory.ignore must list mistakes.py "
                         f"(instructor-only), found {ignore}")
    return ignore


def released_leaks(release_dir: Path, ignore: Sequence[str]) -> list[Path]:
    """Files under ``release_dir`` whose name matches an ignore pattern (must be none).

    Args:
        release_dir: a folder of released assignments.
        ignore: glob patterns of instructor-only files.

    Returns:
        The offending paths, sorted.
    """
    return sorted(p for p in release_dir.rglob("*") if any(fnmatch.fnmatch(p.name, pat) for pat in ignore))


def _as_owner(cmd: list[str], owner: str | None, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``cmd`` in ``cwd``, as ``owner`` when given (we are root), with output captured."""
    env = dict(os.environ)
    if owner:
        pw = pwd.getpwnam(owner)
        env.update(HOME=pw.pw_dir, USER=owner, LOGNAME=owner)
        cmd = [shutil.which("runuser") or "/usr/sbin/runuser", "-u", owner, "--", *cmd]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed in {cwd} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc


def make_course(course_dir: Path, assignments: Sequence[str], *, course_id: str = "attention",
                exchange: str = "/srv/nbgrader/exchange", owner: str | None = None,
                students: Sequence[str] = (), release: bool = False, language: str = "en",
                solutions: Path | None = None) -> list[Path]:
    """Create (or update) the course directory and optionally release the assignments.

    Args:
        course_dir: the course directory to create.
        assignments: names of folders of ``solutions/``.
        course_id: nbgrader course id (must match the learners' configuration).
        exchange: nbgrader's exchange root (default when ``COURSE_EXCHANGE`` is unset).
        owner: Unix user who owns the course (only when running as root).
        students: learner ids to add to the gradebook.
        release: also release each assignment into the exchange.
        language: ``en``, ``zh-CN`` or ``zh-TW``: which edition's sources (``solutions/``, ``zh/solutions/``
            or ``zh-TW/solutions/``).
        solutions: the folder of source assignments instead (e.g. a Chinese edition built elsewhere).

    Returns:
        The released notebooks (``release/<assignment>/*.ipynb``).
    """
    if owner and os.geteuid() != 0:
        raise SystemExit("--owner needs root; run as the instructor without --owner instead")
    language = course_language.language(language)
    if solutions is None:
        solutions = REPO / "solutions" if language == "en" else course_language.solutions_dir(language, REPO)
    solutions = Path(solutions)
    known = sorted(p.name for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
    unknown = [a for a in assignments if a not in known]
    if unknown:
        raise SystemExit(f"no assignment {', '.join(unknown)} in {solutions}; known: {', '.join(known)}")
    ignore = repo_ignore_list()
    course_dir = course_dir.resolve()
    config = course_dir / "nbgrader_config.py"
    fresh = not config.exists()
    for name in assignments:  # re-running updates the sources
        if (course_dir / "source" / name).exists():
            shutil.rmtree(course_dir / "source" / name)
    # The course's nbgrader rules (instructor-only files, stderr, released metadata) are
    # course-grade's own (course_grader.nbgrader_course); this adds the exchange.
    subprocess.run([sys.executable, "-m", "course_grader", "init-course", str(course_dir), *assignments,
                    "--course-id", course_id, "--from", str(solutions)], check=True)
    if fresh:
        config.write_text(config.read_text() + EXCHANGE_CONFIG.format(exchange=exchange))
    if owner:
        pw = pwd.getpwnam(owner)
        for path in [course_dir, *course_dir.rglob("*")]:
            os.chown(path, pw.pw_uid, pw.pw_gid)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    if students:
        roster = course_dir / "students.csv"
        roster.write_text("id\n" + "".join(f"{s}\n" for s in students))
        if owner:
            os.chown(roster, pwd.getpwnam(owner).pw_uid, pwd.getpwnam(owner).pw_gid)
        _as_owner([*nbgrader, "db", "student", "import", str(roster)], owner, course_dir)
    out: list[Path] = []
    for name in assignments:
        _as_owner([*nbgrader, "generate_assignment", name, "--force"], owner, course_dir)
        leaks = released_leaks(course_dir / "release" / name, ignore)
        if leaks:
            raise SystemExit(f"instructor-only files would be released: {', '.join(map(str, leaks))}")
        out += sorted((course_dir / "release" / name).glob("*.ipynb"))
        if release:
            _as_owner([*nbgrader, "release_assignment", name, "--force"], owner, course_dir)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("course_dir", type=Path, help="course directory to create, e.g. ~/course")
    p.add_argument("--assignments", nargs="+", default=None,
                   help="assignments to include (default: every folder of solutions/)")
    p.add_argument("--course-id", default=os.environ.get("COURSE_ID", "attention"))
    p.add_argument("--exchange", default=os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange"))
    p.add_argument("--owner", default=None, help="instructor's Unix user (when running as root)")
    p.add_argument("--students", nargs="*", default=[], help="learner ids to add to the gradebook")
    p.add_argument("--release", action="store_true", help="release the assignments into the exchange")
    p.add_argument("--language", default=os.environ.get("COURSE_LANGUAGE") or "en",
                   help="en, zh-CN or zh-TW: the edition of the assignments (default: $COURSE_LANGUAGE, else en)")
    p.add_argument("--solutions", type=Path, default=None,
                   help="the instructor's source folder to build from (default: the checkout's solutions/)")
    args = p.parse_args(argv)
    names = args.assignments or sorted(p.name for p in (REPO / "solutions").iterdir()
                                       if p.is_dir() and any(p.glob("*.ipynb")))
    released = make_course(args.course_dir, names, course_id=args.course_id, exchange=args.exchange,
                           owner=args.owner, students=args.students, release=args.release,
                           language=args.language, solutions=args.solutions)
    verb = "released" if args.release else "generated (not released)"
    print(f"course {args.course_id!r} in {args.course_dir.resolve()}: {len(released)} notebooks {verb}")
    for path in released:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
