"""Make the branch that the website's "Open in your class hub" links pull: the lessons, the
released assignments and the course's README and licence, without ``solutions/`` (every
hidden test and answer lives there: docs/GRADING.md, "Hand out released notebooks, never the
repository").

    .venv/bin/python site/learner_branch.py                 # branch "learner" from HEAD
    .venv/bin/python site/learner_branch.py --repo /srv/git/course.git --from main --branch learner
    git push origin learner                                 # then build the site with --branch learner

Uses git's plumbing only (a temporary index, ``write-tree``, ``commit-tree``, ``update-ref``):
works in a bare repository, never touches a work tree or the real index. Each run adds a
commit on top of the branch's previous one (when the content changed), so learners'
``git pull`` through nbgitpuller is a fast-forward.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

#: What learners get: lesson notebooks and released assignments of every edition, and the texts
#: that say what the course is and under which licence.
LEARNER_PATHS = ["notebooks", "zh/notebooks", "zh-TW/notebooks", "exercises", "zh/exercises",
                 "zh-TW/exercises", "README.md", "README.zh-CN.md", "README.zh-TW.md", "LICENSE",
                 "docs/GLOSSARY.md", "course_lib/data_files/README.md", "course_lib/data_files/LICENSE-data"]
#: Never in the learner branch, whatever LEARNER_PATHS says.
FORBIDDEN = ("solutions/", "zh/solutions/", "zh-TW/solutions/")


class BranchError(RuntimeError):
    pass


def _git(repo: str, *args: str, env: dict | None = None, input: str | None = None) -> str:
    res = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env, input=input)
    if res.returncode != 0:
        raise BranchError(f"git {' '.join(args)} failed in {repo}: {res.stderr.strip()}")
    return res.stdout.strip()


def make_learner_branch(repo: str, source: str = "HEAD", branch: str = "learner") -> str | None:
    """Points ``branch`` at a commit holding LEARNER_PATHS of ``source``; returns the new commit,
    or None when the branch already has exactly that content."""
    src = _git(repo, "rev-parse", "--verify", f"{source}^{{commit}}")
    listing = _git(repo, "ls-tree", "-r", "--full-tree", src, "--", *LEARNER_PATHS)
    entries = [l for l in listing.splitlines() if l]
    paths = [l.split("\t", 1)[1] for l in entries]
    bad = [p for p in paths if p.startswith(FORBIDDEN)]
    if bad:
        raise BranchError(f"instructor files would reach learners: {bad[:5]}")
    if not any(p.startswith("notebooks/") and p.endswith(".ipynb") for p in paths):
        raise BranchError(f"{source} has no notebooks/*.ipynb in {repo}: is this the course repository?")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, GIT_INDEX_FILE=os.path.join(tmp, "index"))
        _git(repo, "read-tree", "--empty", env=env)
        _git(repo, "update-index", "--index-info", env=env, input="\n".join(entries) + "\n")
        tree = _git(repo, "write-tree", env=env)
    try:
        previous = _git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")
    except BranchError:
        previous = ""
    if previous and _git(repo, "rev-parse", f"{previous}^{{tree}}") == tree:
        return None
    ident = {"GIT_AUTHOR_NAME": "course site", "GIT_AUTHOR_EMAIL": "course-site@localhost",
             "GIT_COMMITTER_NAME": "course site", "GIT_COMMITTER_EMAIL": "course-site@localhost"}
    env = dict(os.environ, **{k: os.environ.get(k, v) for k, v in ident.items()})
    parents = ["-p", previous] if previous else []
    commit = _git(repo, "commit-tree", tree, *parents, "-m",
                  f"Learner branch from {src[:12]}: lessons and released assignments, no solutions", env=env)
    _git(repo, "update-ref", f"refs/heads/{branch}", commit, *([previous] if previous else []))
    return commit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", default=".", help="the course repository (bare or not; default: here)")
    p.add_argument("--from", dest="source", default="HEAD", help="the commit to take the files from (default HEAD)")
    p.add_argument("--branch", default="learner", help="the branch to write (default learner)")
    opts = p.parse_args(argv)
    try:
        commit = make_learner_branch(opts.repo, opts.source, opts.branch)
    except BranchError as exc:
        print(f"site/learner_branch.py: {exc}", file=sys.stderr)
        return 2
    print(f"branch {opts.branch}: " + (f"now {commit[:12]}" if commit else "already up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
