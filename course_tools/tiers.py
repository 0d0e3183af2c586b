"""Test tiers: what a test needs from the machine and what it costs (README "Tests").

Markers (declared in pyproject.toml):

* ``notebooks`` - the lessons re-run by nbval (added to every notebook cell automatically);
* ``sandbox``   - runs learner code in the grader's bubblewrap sandbox (needs bubblewrap and
                  user namespaces);
* ``system``    - changes the machine: creates Unix users or groups, installs outside the
                  checkout and the temporary directory, or starts system services.  Runs only
                  when asked: ``-m system`` or ``COURSE_TEST_SYSTEM=1`` (``.ci/run`` asks);
* ``e2e``       - a real browser against a real JupyterHub (needs root, chromium, nodejs and
                  configurable-http-proxy); always also ``system``;
* ``browser``   - a real browser (Chromium through playwright) against a ``jupyter lab`` the test
                  starts on 127.0.0.1 with temporary settings: needs chromium but changes nothing
                  on the host, so it runs in the default ``python -m pytest`` (not ``system``);
                  a missing piece is treated as for ``e2e``;
* ``slow``      - costs more than a fast test may (FAST_TEST_CPU_S, 0.1 s of CPU): from a
                  gradcheck to the fairness check over seeds;
* ``lint``      - ruff and mypy over the code (mypy with its cache in .mypy_cache): CI's first
                  stage;
* ``content``   - lint of the course's content, not its code: glossary, translations (i18n),
                  notebook hygiene; seconds, but many tests;
* ``fast``      - the library, the grader's units, scripts and deploy files: the tier a
                  developer runs after each change (``python -m pytest -m fast``).

Every test module declares its tier: ``TIER = "fast"`` after its imports, or a tier marker in
its ``pytestmark``; a test may carry another tier marker of its own (a ``slow`` test in a
``fast`` module). A module that declares none stops the run at collection, naming it.

A test whose machine piece is missing is skipped with a reason that names the piece and the
command that installs it - except under ``CI=true``, where a missing piece fails the test.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout (an editable install)
TIERS = ("lint", "fast", "content", "notebooks", "sandbox", "slow", "browser", "system", "e2e")
# what a test module may declare (notebooks are the lessons, marked automatically)
DECLARABLE = frozenset(TIERS) - {"notebooks"}
SETUP_CMD = "bash scripts/setup.sh"
SYSTEM_ENV = "COURSE_TEST_SYSTEM"


def declared_tier(module) -> str | None:
    """The tier a test module declares: its ``TIER`` constant, else the first tier marker of
    its ``pytestmark``; None if it declares none. ValueError names a ``TIER`` that is no tier."""
    tier = getattr(module, "TIER", None)
    if tier is not None:
        if tier not in DECLARABLE:
            raise ValueError(f"{module.__file__}: TIER = {tier!r} is not a tier; "
                             f"choose one of {sorted(DECLARABLE)} (course_tools/tiers.py says what each means)")
        return tier
    marks = getattr(module, "pytestmark", [])
    for mark in marks if isinstance(marks, list) else [marks]:
        if getattr(mark, "name", None) in DECLARABLE:
            return mark.name
    return None


def undeclared_message(paths: list[str]) -> str:
    return ("these test modules declare no tier: " + ", ".join(paths) + ". Add a line such as "
            "`TIER = \"fast\"` after the imports (or a tier marker in `pytestmark`); the tiers are "
            + ", ".join(sorted(DECLARABLE)) + " (course_tools/tiers.py says what each needs and costs)")


# nbval waits this long for a finished cell's output messages before it fails the cell and skips the
# rest of the lesson ("Timeout of 5 seconds exceeded waiting for output", its fixed default). On two
# cores shared with other programs the kernel's output thread can be starved longer than that after
# a cell that trained with torch: a lesson that is right must not fail because the machine is busy.
NBVAL_OUTPUT_WAIT_S = 120


def widen_output_wait(item) -> None:
    """Give an nbval cell item NBVAL_OUTPUT_WAIT_S seconds to deliver its outputs (the cell's own
    run time stays bounded by ``--nbval-cell-timeout``)."""
    if getattr(item, "output_timeout", None) is not None:
        item.output_timeout = max(item.output_timeout, NBVAL_OUTPUT_WAIT_S)


# A fast test costs under FAST_TEST_CPU_S of CPU on the development machine (about 1,000 of them
# make the tier, which must stay under 30 s): a test that costs more (a gradcheck, a scan of the
# real corpus, a model trained, a grading pipeline, an interpreter started) is marked ``slow``,
# with its measured cost. A fast-stage test that spends more than FAST_TEST_CPU_BUDGET_S (its own
# CPU and its reaped children's, setup to teardown; room for a slower or busier machine) is named
# at the end of the run.
FAST_TEST_CPU_S = 0.1
FAST_TEST_CPU_BUDGET_S = 0.25


def load_lazy_imports() -> None:
    """Import what torch loads on first use and many fast tests use: torch.testing's first
    comparison (torch.distributed.tensor) and the first optimizer (torch._dynamo), about 0.8 s of
    CPU each with torch 2.13; and nbgrader (its package imports jupyter_server's, ~1 s), which the
    grader's fast tests use. The root conftest calls this before the first fast test's CPU is
    measured, so that the budget names tests by their own cost, not by which one came first."""
    import torch

    try:
        import nbgrader.preprocessors  # noqa: F401 - loaded for its cost, not used here
    except ImportError:  # the tests that need it say so themselves
        pass

    torch.testing.assert_close(torch.zeros(1), torch.zeros(1))
    weight = torch.zeros(1, requires_grad=True)
    weight.sum().backward()
    torch.optim.SGD([weight], lr=0.1).step()


#: the tiers in the order that claims a test (as .ci/run's claim list): a test runs in the first
CLAIM = ("system", "browser", "notebooks", "sandbox", "slow", "content", "fast", "lint")


def stage_of(markers) -> str | None:
    """The CI stage a test with these marker names runs in (the first tier of CLAIM it carries)."""
    names = set(markers)
    return next((t for t in CLAIM if t in names), None)


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its children that have been waited for."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def over_budget_message(spent: dict[str, float], budget: float = FAST_TEST_CPU_BUDGET_S) -> str | None:
    """The line naming the fast tests that spent more than ``budget`` seconds of CPU each
    (costliest first), or None if none did."""
    over = sorted(((cpu, node) for node, cpu in spent.items() if cpu > budget), reverse=True)
    if not over:
        return None
    return (f"fast tests over {budget:g} s of CPU each (the test and its children): "
            + ", ".join(f"{node} {cpu:.1f} s" for cpu, node in over)
            + ". Mark such a test @pytest.mark.slow (say why), or make it cheaper (course_tools/tiers.py)")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def system_asked(markexpr: str) -> bool:
    """Was the system tier asked for (COURSE_TEST_SYSTEM=1, or ``-m`` naming ``system``
    other than as ``not system``)?"""
    if os.environ.get(SYSTEM_ENV, "").lower() in ("1", "true", "yes"):
        return True
    words = markexpr.replace("(", " ").replace(")", " ").split()
    return any(w in ("system", "e2e") and (i == 0 or words[i - 1] != "not") for i, w in enumerate(words))


def _install_hint(debian_pkgs: str) -> str:
    if sys.platform == "darwin":
        return "not available on macOS: use a Linux machine (or a Linux VM) for this tier"
    how = f"`sudo apt-get install {debian_pkgs}`"
    return f"install it with `sudo {SETUP_CMD}` or {how} (Fedora: `sudo dnf install {debian_pkgs}`)"


@lru_cache(maxsize=None)
def missing_sandbox() -> str | None:
    """None if the grader's sandbox works here, else what is missing and how to get it."""
    if not sys.platform.startswith("linux"):
        return (f"the grader's sandbox (bubblewrap) needs Linux; this is {platform.system()}: "
                "lessons, exercises and `course-grade --check` work here, grading a class does not")
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: " + _install_hint("bubblewrap")
    from course_grader.sandbox import isolation_status

    ok, why = isolation_status()
    return None if ok else f"bubblewrap cannot start a sandbox here: {why}"


@lru_cache(maxsize=None)
def missing_browser_pieces() -> str | None:
    """None if the class-hub browser test can run, else what is missing."""
    if not sys.platform.startswith("linux"):
        return f"the class hub test needs Linux (PAM users, bubblewrap); this is {platform.system()}"
    if os.geteuid() != 0:
        return ("the class hub test creates Unix users and starts JupyterHub as root: run the system tier as "
                "root (`sudo env COURSE_TEST_SYSTEM=1 .venv/bin/python -m pytest -m e2e`)")
    gone = []
    chromium = os.environ.get("COURSE_E2E_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        gone.append(f"chromium ({chromium})")
    if shutil.which("node") is None:
        gone.append("nodejs")
    if shutil.which("configurable-http-proxy") is None:
        gone.append("configurable-http-proxy (npm)")
    if not gone:
        return None
    return (", ".join(gone) + " missing: install with `sudo bash scripts/setup_system.sh` "
            f"(or `sudo {SETUP_CMD}`, which runs it)")


@lru_cache(maxsize=None)
def missing_browser() -> str | None:
    """None if a ``browser`` test can run (Chromium, playwright, JupyterLab's Chinese language
    pack), else what is missing and how to get it."""
    gone = []
    chromium = os.environ.get("COURSE_E2E_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        gone.append(f"chromium ({chromium}) is missing: " + _install_hint("chromium"))
    import importlib.util
    if importlib.util.find_spec("playwright") is None:
        gone.append("playwright (Python) is missing: install the dev extra with `bash scripts/setup.sh` "
                    "(or `.venv/bin/pip install -e '.[dev]'`)")
    if importlib.util.find_spec("jupyterlab_language_pack_zh_CN") is None:
        gone.append("jupyterlab-language-pack-zh-CN is missing: `bash scripts/setup.sh` (or `.venv/bin/pip install -e .`)")
    return "; ".join(gone) if gone else None


SHARD_OPTION = "--ci-shard"


def parse_shard(spec: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N): shard I of N, 1 <= I <= N. ValueError says what a shard looks like."""
    parts = spec.split("/")
    if len(parts) == 2 and all(p.isdigit() for p in parts) and 1 <= int(parts[0]) <= int(parts[1]):
        return int(parts[0]), int(parts[1])
    raise ValueError(f"{SHARD_OPTION}={spec!r}: a shard is I/N, part I of N with 1 <= I <= N (e.g. {SHARD_OPTION}=2/3)")


def shard_unit(item) -> str:
    """What stays together in one shard: a lesson notebook's cells (nbval runs them in order, in
    one kernel), otherwise one test."""
    return str(item.path) if item.path.suffix == ".ipynb" else item.nodeid


def split_shard(items: list, shard: tuple[int, int]) -> tuple[list, list]:
    """(kept, left) for shard (I, N) of ``items``: the units (:func:`shard_unit`) in the order they
    were collected, dealt round-robin, so that the N shards of one selection are disjoint and run
    every item once between them, and a stage's costly cases (listed together) are shared out."""
    index, count = shard
    order: dict[str, int] = {}
    for item in items:
        order.setdefault(shard_unit(item), len(order))
    kept: list = []
    left: list = []
    for item in items:
        (kept if order[shard_unit(item)] % count == index - 1 else left).append(item)
    return kept, left


#: course_lib.project.CACHE_ENV (not imported here: that would load torch before the first test)
PROJECT_CACHE_ENV = "COURSE_PROJECT_CACHE"
#: where torch's compiler keeps its cache; torch makes ``<temp dir>/torchinductor_<user>`` the first
#: time a process imports torch._dynamo (an optimizer's first step does), and never removes it
TORCH_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
#: the folders every process of a test run shares, by the variable that names each, with the
#: prefix of the temporary folder made when the variable names none
RUN_FOLDERS = {PROJECT_CACHE_ENV: "course-project-runs-", TORCH_CACHE_ENV: "course-torch-cache-"}
_run_folders_made: dict[str, str] = {}  # the folders make_run_folders made, by variable


def make_run_folders() -> None:
    """Name a folder for each of :data:`RUN_FOLDERS` that no variable names yet, for this run and
    every process it starts (children inherit the variables). Lesson 12's project runs
    (course_lib.project.run keeps its results in ``COURSE_PROJECT_CACHE``): the grading tests score
    the same few configurations in the grader's workers, in Jupyter kernels and in this process,
    ~20 s of CPU each time. torch's compiler cache: without a folder named, every process that
    steps an optimizer leaves ``torchinductor_<user>`` in the temporary directory. A folder already
    named (``.ci/run`` names one for all its stages) is used as it is; one made here is removed by
    :func:`remove_run_folders` when the run ends."""
    import tempfile

    for env, prefix in RUN_FOLDERS.items():
        if not os.environ.get(env):
            _run_folders_made[env] = os.environ[env] = tempfile.mkdtemp(prefix=prefix)


def remove_run_folders() -> None:
    """Remove the folders :func:`make_run_folders` made (none it was given), and their variables."""
    for env, folder in list(_run_folders_made.items()):
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get(env) == folder:
            del os.environ[env]
        del _run_folders_made[env]


#: folders a test keeps for a person to look at (screenshots, logs): what each holds, by path; the
#: run's last lines name them (conftest.py), since pytest hides what a passing test prints
KEPT: dict[str, str] = {}


def keep_folder(what: str, env: str, prefix: str) -> Path:
    """A folder a test keeps after the run: the one ``env`` names, else a new temporary one; named
    in the run's summary (``kept for you: ...``)."""
    import tempfile

    path = Path(os.environ.get(env) or tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    KEPT.setdefault(str(path), what)
    return path


def kept_lines() -> list[str]:
    """The summary's lines for the kept folders (none if no test kept one)."""
    return [f"kept for you: {what}: {path}" for path, what in KEPT.items()]


def host_snapshot() -> dict[str, str]:
    """Digests of what a default test run must leave unchanged: the system's users and
    groups, what lies in /opt (two levels of names), and the checkout (tracked content and
    untracked names, less what Python and pytest cache)."""
    snap: dict[str, str] = {}
    for f in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"):
        try:
            data = Path(f).read_bytes()
            snap[f] = hashlib.sha256(data).hexdigest()
            # the entries' names (never a password field), to say what changed
            snap[f + " names"] = "\n".join(sorted({line.split(b":", 1)[0].decode(errors="replace")
                                                   for line in data.splitlines() if line.strip()}))
        except OSError:
            snap[f] = "unreadable"
    opt = Path("/opt")
    names = []
    if opt.is_dir():
        for top in sorted(opt.iterdir()):
            names.append(top.name)
            if top.is_dir() and not top.is_symlink():
                try:
                    names += [f"{top.name}/{p.name}" for p in sorted(top.iterdir())]
                except OSError:
                    pass
    snap["/opt"] = hashlib.sha256("\n".join(names).encode()).hexdigest()
    snap["/opt names"] = "\n".join(names)
    try:
        # --ignored=matching: an ignored folder is one entry (.venv/ is one line, not 60,000), and
        # a new ignored file or folder outside the ignored folders is still listed
        status = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--ignored=matching", "--untracked-files=all"],
                                cwd=REPO, capture_output=True, timeout=60, check=True).stdout
        ignored_ok = (".venv/", "__pycache__/", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", ".egg-info/")
        entries = sorted(e for e in status.decode(errors="replace").split("\0")
                         if e and not any(k in e + "/" for k in ignored_ok))
        digest = hashlib.sha256()
        for e in entries:
            digest.update(e.encode())
            path = REPO / e[3:]
            if path.is_file() and not path.is_symlink():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        snap["checkout"] = digest.hexdigest()
        snap["checkout files"] = "\n".join(entries)
    except (OSError, subprocess.SubprocessError):
        snap["checkout"] = "not a git checkout"
    return snap


def describe_changes(before: dict[str, str], after: dict[str, str], keys: tuple[str, ...]) -> list[str]:
    """What changed between two snapshots, one line per place: entries added and removed by
    name (or "content changed" when the names are the same). Says what, not who: another
    program on the machine may have made the change while the tests ran."""
    lines = []
    for key in keys:
        if after.get(key) == before.get(key):
            continue
        old = set(before.get(key + " names", "").splitlines())
        new = set(after.get(key + " names", "").splitlines())
        added, removed = sorted(new - old), sorted(old - new)
        what = "; ".join(part for part in (f"added {added}" if added else "", f"removed {removed}" if removed else "") if part)
        lines.append(f"{key}: {what or 'content changed (same entries)'}")
    return lines
