"""The grader against a motivated learner (issue 9), as root AND as an ordinary user.

One class of attack notebooks (built from the lesson03_scoring solution) is graded with
the real command line, ``python -m course_grader grade ... --jobs 2``, once as the
user running the tests (root in CI) and once as an ordinary account (created here when
we are root; the interpreter is made reachable for it when it lives under ``/root``).
Each test then reads that run's gradebook. Every attack is paired with wrong code where
points could be gained: it must score exactly what the same wrong code scores alone
(``wrongdot``), and honest classmates must keep full marks.

Root causes covered (see the issue): 1. the sandbox could read and write what the grader
can; 2. the trusted side evaluated learner-controlled names; 3. one learner could take the
whole class run down. Plus our own attacks (network, /proc, mounts, tmpfs filling, huge
messages, self-stopping, ...).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course_grader.sandbox import isolation_status
from course_tools.grading_dev.points import assignment_points, cell_index
from course_tools.grading_dev.testing import load_mistakes, variant, write_notebook

pytestmark = [pytest.mark.sandbox]

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "lesson03_scoring" / "scoring.ipynb"
POINTS = assignment_points(SOLUTION.parent)
FULL = POINTS.auto  # full marks from the grader, whatever the edition of lesson 3
SECRET = "lms-token-5f1e2d9c"      # in the grader's environment; no learner may see it
OLD_NAME = "classmate-from-last-run"  # in a previous gradebook kept in the output folder
MARK = "persist-mark-7c1d"          # written by one learner, looked for by later ones
ORDINARY_USER = "coursegradetest"

# the listed typical mistake "missing_sqrt": a wrong answer that scores less than full marks
WRONG_DOT = load_mistakes(SOLUTION.parent)["missing_sqrt"]["replace"]["dot_product_attention"]
WRONG_DOT_FAILS = load_mistakes(SOLUTION.parent)["missing_sqrt"]["fails"]

# 1. read the instructor's solution wherever the grader's files might be, run its cells
FIND_SOLUTION = '''
import glob, json, os, sys
_found = []
_roots = {{os.path.dirname(os.path.dirname(p)) for p in sys.path if p}} | {{{root!r}, "/root", "/home", "/work", "/"}}
for _pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
    try:
        _cmd = open(f"/proc/{{_pid}}/cmdline", "rb").read().decode(errors="replace")
        _roots.update(a for a in _cmd.split("\\0") if a.startswith("/"))
    except OSError:
        pass
for _r in _roots:
    for _p in glob.glob(os.path.join(_r, "**", "solutions", "lesson03_scoring", "scoring.ipynb"), recursive=False) \\
            + glob.glob(os.path.join(_r, "solutions", "lesson03_scoring", "scoring.ipynb")):
        _found.append(_p)
for _p in _found:
    try:
        _nb = json.load(open(_p))
        for _c in _nb["cells"]:
            if _c.get("metadata", {{}}).get("nbgrader", {{}}).get("grade_id") == "dot_product_attention":
                exec("".join(_c["source"]))
                print("FOUND-SOLUTION", _p)
    except Exception as _e:
        print("unreadable", _p, _e)
'''

# 1. the grader's environment and other processes
SNOOP = '''
import os
print("ENV", sorted(os.environ.items()))
for _pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
    for _what in ("environ", "cmdline"):
        try:
            print("PROC", _pid, open(f"/proc/{_pid}/{_what}", "rb").read()[:2000])
        except OSError:
            pass
'''

# 1. kill or stop every process we can reach: the grader, the fork server, other sandboxes
KILL_ALL = '''
import os, signal
for _sig in (signal.SIGSTOP, signal.SIGKILL):
    for _pid in list(range(2, 5000)) + [os.getppid()]:
        if _pid == os.getpid():
            continue
        try:
            os.kill(_pid, _sig)
        except OSError:
            pass
'''

# 1. files meant to outlive this submission, and writes to the course and the teacher's account
PERSIST = '''
import os, glob, site, sys
_targets = ["/tmp/{mark}", "/var/tmp/{mark}", "/dev/shm/{mark}", os.path.expanduser("~/{mark}"),
            {out!r} + "/grades.csv", {out!r} + "/{mark}", {victim!r}]
for _t in _targets:
    try:
        with open(_t, "a") as _fh:
            _fh.write("{mark}")
        print("wrote", _t)
    except OSError as _e:
        print("refused", _t, _e.errno)
import course_lib, course_grader
_pkg = os.path.dirname(course_lib.__file__)
for _t in [os.path.join(_pkg, "__init__.py"), os.path.join(os.path.dirname(course_grader.__file__), "checks.py"),
           os.path.join(os.path.dirname(course_grader.__file__), "runner.py"),
           os.path.join(site.getsitepackages()[0], "zz_{mark}.pth"),
           os.path.expanduser("~/.ipython/profile_default/startup/00-{mark}.py")]:
    try:
        os.makedirs(os.path.dirname(_t), exist_ok=True)
        with open(_t, "a") as _fh:
            _fh.write("\\n# {mark}\\n")
        print("wrote", _t)
    except OSError as _e:
        print("refused", _t, _e.errno)
for _old in glob.glob({out!r} + "/grades.*"):
    try:
        print("OLD-GRADEBOOK", open(_old).read())
    except OSError:
        pass
'''

LOOK_FOR_MARK = '''
import os
for _d in ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~")):
    try:
        print("LISTING", _d, os.listdir(_d))
    except OSError:
        pass
'''

# 2. learner-defined builtins must not reach the hidden tests
BUILTINS = '''
def range(*a):
    return []
def bool(*a):
    return True
def len(*a):
    return 0
def isinstance(*a):
    return True
def all(*a):
    return True
def any(*a):
    return False
def abs(x):
    return 0
'''

# 2. a module object named after a module the grader would import (its __main__ exits)
MODULE_NAME = '''
import types
evil = types.ModuleType("course_grader.__main__")
evil2 = types.ModuleType("antigravity")
torch_fake = types.ModuleType("torch.utils.bottleneck.__main__")
'''

# 3. lone surrogates in an error message and in printed output
SURROGATE = '''
print("\\ud800 printed")
raise ValueError("\\ud800 broken \\udfff")
'''

# own attacks: network, mounts, namespaces, filling the disk, huge and odd messages
MISC = '''
import os, socket, ctypes
print("UID", os.getuid())
for _addr in (("127.0.0.1", 22), ("1.1.1.1", 53), ("8.8.8.8", 443)):
    try:
        socket.create_connection(_addr, timeout=1)
        print("CONNECTED", _addr)
    except OSError:
        pass
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.mount(b"tmpfs", b"/mnt", b"tmpfs", 0, None) == 0:
    print("MOUNTED")
try:
    with open("/tmp/fill", "wb") as _fh:
        for _ in range(1024):
            _fh.write(b"x" * 2**20)
    print("FILLED 1 GB")
except OSError as _e:
    print("disk full as expected", _e.errno)
os.remove("/tmp/fill")
'''

HUGE_MESSAGE = '''
print("y" * 10_000_000)
raise RuntimeError("z" * 10_000_000)
'''

STOP_SELF = '''
import os, signal
os.kill(os.getpid(), signal.SIGSTOP)
'''

LONG_MAGIC_CELL = "\n".join(["_x = 1"] * 3000 + ["%time _y = 2"] * 3000)


def _class(sub: Path, out: Path) -> dict[str, str]:
    """Write the class; returns {student: kind}."""
    def put(student: str, nb: dict) -> Path:
        return write_notebook(nb, sub / student / "scoring.ipynb")

    victim = sub / "honest" / "scoring.ipynb"
    put("honest", variant(SOLUTION))
    put("wrongdot", variant(SOLUTION, replace={"dot_product_attention": WRONG_DOT}))
    attacks = {
        "findsol": FIND_SOLUTION.format(root=str(ROOT)),
        "snoop": SNOOP,
        "killall": KILL_ALL,
        "persist": PERSIST.format(mark=MARK, out=str(out / "lesson03_scoring"), victim=str(victim)),
        "builtins": BUILTINS,
        "misc": MISC,
    }
    for student, code in attacks.items():
        put(student, variant(SOLUTION, replace={"dot_product_attention": code + WRONG_DOT}))
    # later learners (alphabetically and in time) look for what "persist" left behind
    for student in ("zz_look1", "zz_look2"):
        put(student, variant(SOLUTION, append={"answers": LOOK_FOR_MARK}))
    put("modname", variant(SOLUTION, append={"answers": MODULE_NAME}))
    put("surrogate", variant(SOLUTION, append={"answers": SURROGATE}))
    put("huge", variant(SOLUTION, append={"answers": HUGE_MESSAGE}))
    put("stopself", variant(SOLUTION, append={"answers": STOP_SELF}))
    nb = variant(SOLUTION)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": LONG_MAGIC_CELL})
    put("longcell", nb)
    big = variant(SOLUTION)
    for _ in range(60):  # ~150 KB of cells that each print as much as they may
        big["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                             "source": "print('w' * 100_000)\n# " + "p" * 2400})
    put("bigout", big)
    nb = variant(SOLUTION, replace={"answers": "import importlib\n_m = importlib.import_module('course_lib.scoring')\n"
                                               "ANSWER_VARIANCE, ANSWER_SQRT, ANSWER_MASK = 1, 1, 1"})
    put("importref", nb)
    # submissions that are not regular files inside the learner's folder
    (sub / "symdir").symlink_to(SOLUTION.parent)
    (sub / "symfile").mkdir()
    (sub / "symfile" / "scoring.ipynb").symlink_to(SOLUTION)
    (sub / "symclass").mkdir()
    (sub / "symclass" / "scoring.ipynb").symlink_to(victim)
    (sub / "devzero").mkdir()
    (sub / "devzero" / "scoring.ipynb").symlink_to("/dev/zero")
    (sub / "fifo").mkdir()
    os.mkfifo(sub / "fifo" / "scoring.ipynb")
    return {}


def _digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _watched_files() -> list[Path]:
    import site
    pkg = ROOT / "course_lib"
    return [pkg / "__init__.py", ROOT / "course_grader" / "checks.py", ROOT / "course_grader" / "runner.py", SOLUTION,
            *Path(site.getsitepackages()[0]).glob("*.pth")]


def _ordinary_user() -> tuple[int, int] | None:
    """uid/gid of an ordinary account for the tests (created when we are root)."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    try:
        entry = pwd.getpwnam(ORDINARY_USER)
    except KeyError:
        if shutil.which("useradd") is None:
            return None
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ORDINARY_USER],
                       check=False, capture_output=True)
        try:
            entry = pwd.getpwnam(ORDINARY_USER)
        except KeyError:
            return None
    return entry.pw_uid, entry.pw_gid


def _as_user_prefix(uid: int, gid: int) -> list[str] | None:
    """Command prefix that runs as uid/gid with this interpreter reachable (None: impossible)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    drop = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    check = [sys.executable, "-c", "import sys; from course_grader.sandbox import isolation_status as s; "
             "sys.exit(0 if s()[0] else 1)"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    probe = subprocess.run([*drop, *check], capture_output=True, cwd="/", env=env)
    if probe.returncode == 0:
        return drop
    # The interpreter lives where the account cannot go (e.g. pyenv under /root, mode 0700):
    # show it only that installation, in a private mount namespace made by bubblewrap.
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    hidden = [p for p in ("/root",) if os.path.realpath(sys.executable).startswith(p + "/")]
    wrap = [bwrap, "--dev-bind", "/", "/"]
    for top in hidden:
        keep = os.path.realpath(sys.executable).split("/")[:3]  # e.g. /root/.pyenv
        wrap += ["--tmpfs", top, "--ro-bind", "/".join(keep), "/".join(keep)]
    wrap += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]
    probe = subprocess.run([*wrap, *drop, *check], capture_output=True, cwd="/", env=env)
    return [*wrap, *drop] if probe.returncode == 0 else None


def _root_reaching_python() -> list[str] | None:
    """As root: a prefix that keeps root but shows the Python installation to other uids
    (so the grader runs bubblewrap as an unprivileged uid, as on a machine with a system-wide
    Python). None when not root; [] when the interpreter is reachable already."""
    if os.geteuid() != 0:
        return None
    exe = os.path.realpath(sys.executable)
    if not exe.startswith("/root/"):
        return []
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    keep = "/".join(exe.split("/")[:3])  # e.g. /root/.pyenv
    return [bwrap, "--dev-bind", "/", "/", "--tmpfs", "/root", "--ro-bind", keep, keep, "--cap-add", "ALL", "--"]


def condition_prefix(mode: str) -> tuple[list[str], tuple[int, int] | None]:
    """The command prefix that runs the grader in one of the attack conditions ("self": as we
    are; "root-dropped": root, the sandbox as an unprivileged uid; "user": an ordinary account),
    and that account's (uid, gid) for "user". Skips the test where the condition cannot be had."""
    if mode == "root-dropped":
        got = _root_reaching_python()
        if got is None:
            pytest.skip("not root: the root-drops-to-an-unprivileged-uid mode does not apply")
        return got, None
    if mode == "user":
        owner = _ordinary_user()
        if owner is None:
            pytest.skip("no ordinary account can be created here (not root and useradd missing)")
        got = _as_user_prefix(*owner)
        if got is None:
            pytest.skip("the ordinary account cannot run this Python (and bubblewrap cannot show it)")
        return got, owner
    return [], None


def _run_class(mode: str) -> dict:
    if not isolation_status()[0]:
        pytest.fail(f"bubblewrap must work for these tests (CI installs it): {isolation_status()[1]}")
    prefix, owner = condition_prefix(mode)
    base = Path(tempfile.mkdtemp(prefix=f"grading-attacks-{mode}-"))
    sub, out = base / "submitted", base / "grades"
    _class(sub, out)
    (out / "lesson03_scoring").mkdir(parents=True)
    for old in (out / "grades.csv", out / "lesson03_scoring" / "grades.csv"):  # either gradebook layout
        old.write_text(f"student,total\n{OLD_NAME},15\n")  # kept as grades.<stamp>.csv
        os.chmod(old, 0o644)
    os.chmod(out, 0o755)
    os.chmod(out / "lesson03_scoring", 0o755)
    if owner is not None and os.geteuid() == 0:
        for path in [base, *base.rglob("*")]:
            os.lchown(path, *owner)
    before = _digest(_watched_files())
    victim_before = (sub / "honest" / "scoring.ipynb").read_bytes()
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "LANG", "OMP_"))}
    env.update(COURSE_TEST_SECRET=SECRET, PYTHONPATH=str(ROOT), HOME=str(base))
    cmd = [*prefix, sys.executable, "-m", "course_grader", "grade", "lesson03_scoring", str(sub),
           "--out", str(out), "--jobs", "2", "--cell-timeout", "8", "--call-timeout", "8", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(ROOT), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    book = out / "lesson03_scoring"  # <out>/<assignment>/grades.csv, or <out>/grades.csv before that layout
    book = book if (book / "grades.json").exists() else out
    rows = {r["student"]: r for r in csv.DictReader((book / "grades.csv").open())}
    text = (book / "grades.json").read_text()
    results = {r["student"]: r for r in json.loads(text)["results"]}
    data = {"mode": mode, "base": base, "out": out, "book": book, "rows": rows, "results": results, "json": text,
            "before": before, "after": _digest(_watched_files()),
            "victim_changed": (sub / "honest" / "scoring.ipynb").read_bytes() != victim_before,
            "host_marks": [p for d in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(d).glob(f"*{MARK}*")],
            "owner": owner}
    return data


# As root, "user" creates an ordinary Unix account: the system tier (course_tools/tiers.py).
@pytest.fixture(scope="module", params=["grader-user", pytest.param("user", marks=pytest.mark.system if os.geteuid() == 0 else ()),
                                       "root-dropped"])
def graded(request):
    data = _run_class({"grader-user": "self"}.get(request.param, request.param))
    yield data
    shutil.rmtree(data["base"], ignore_errors=True)


def _total(graded, student) -> float:
    return float(graded["rows"][student]["total"])


def _stdout(graded, student) -> str:
    return "".join(c.get("stdout", "") + c.get("stderr", "") + c.get("message", "")
                   for nb in graded["results"][student]["notebooks"] for c in nb["cells"])


def _notes(graded, student) -> str:
    return " ".join(n for nb in graded["results"][student]["notebooks"] for n in nb["notes"])


# -- baseline -------------------------------------------------------------------------------

def test_every_learner_has_a_row_and_honest_work_full_marks(graded):
    assert {"honest", "wrongdot", "findsol", "snoop", "killall", "persist", "builtins", "misc", "zz_look1",
            "zz_look2", "modname", "surrogate", "huge", "stopself", "longcell", "bigout", "importref",
            "symdir", "symfile", "symclass", "devzero", "fifo"} <= set(graded["rows"])
    assert _total(graded, "honest") == FULL
    assert 0 < _total(graded, "wrongdot") < FULL
    for test in WRONG_DOT_FAILS:  # the tests that catch the mistake, and only those, lose their points
        assert graded["rows"]["wrongdot"][test] == "0", test
    assert _total(graded, "wrongdot") == POINTS.without(WRONG_DOT_FAILS)


# -- 1. the sandbox sees only what it needs -----------------------------------------------

def test_solutions_are_out_of_reach(graded):
    assert "FOUND-SOLUTION" not in _stdout(graded, "findsol")
    assert _total(graded, "findsol") == _total(graded, "wrongdot")


def test_grader_environment_and_processes_are_invisible(graded):
    out = _stdout(graded, "snoop")
    assert "ENV" in out  # the attack ran
    assert SECRET not in graded["json"]
    assert "PROC" not in out  # no /proc at all in the sandbox


def test_killing_every_visible_process_costs_only_the_attacker(graded):
    assert _total(graded, "killall") == _total(graded, "wrongdot")
    for student in ("honest", "zz_look1", "zz_look2"):
        assert _total(graded, student) == FULL, student


def test_nothing_written_in_the_sandbox_survives_or_reaches_the_host(graded):
    out = _stdout(graded, "persist")
    assert "refused" in out
    assert "wrote /tmp/" in out  # its own private /tmp works...
    for student in ("zz_look1", "zz_look2"):  # ...and is gone for the next learners
        assert MARK not in _stdout(graded, student)
    assert graded["host_marks"] == []
    assert graded["before"] == graded["after"]  # course sources, solutions, site-packages .pth files
    assert not graded["victim_changed"]
    assert _total(graded, "persist") == _total(graded, "wrongdot")


def test_previous_gradebooks_are_private_and_unreachable(graded):
    assert OLD_NAME not in _stdout(graded, "persist")
    out, book = graded["out"], graded["book"]
    kept = list(book.glob("grades.2*.csv"))
    assert kept, "the previous gradebook was kept"
    assert OLD_NAME in kept[0].read_text()
    for folder in (out, book, book / "feedback"):
        assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0, folder
    for path in [*kept, book / "grades.csv", book / "grades.json", *out.glob("lms*.csv"),
                 *(book / "feedback").glob("*.html")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_no_network_no_mounts_bounded_disk(graded):
    out = _stdout(graded, "misc")
    if graded["mode"] in ("user", "root-dropped"):  # never uid 0 unless the grader is root and Python is
        assert "UID 0" not in out                  # out of other users' reach (then: no capability)
    assert "CONNECTED" not in out and "MOUNTED" not in out and "FILLED 1 GB" not in out
    assert "disk full as expected" in out


# -- 2. the trusted side evaluates nothing the learner controls ----------------------------

def test_learner_builtins_do_not_reach_the_tests(graded):
    # The attack's builtins (all -> True, abs -> 0, len -> 0, ...) would make the trusted checks
    # pass wrong code: no test may score more than with the wrong code alone. They also break the
    # learner's own later cells (those that call range, len, abs...), which may then lose points:
    # only tests after the attack's cell may differ, and never upwards.
    rows = graded["rows"]
    attack_at = cell_index(SOLUTION, grade_id="dot_product_attention")
    for test in POINTS.tests:
        assert float(rows["builtins"][test]) <= float(rows["wrongdot"][test]), test
        if cell_index(SOLUTION, grade_id=test) < attack_at:
            assert rows["builtins"][test] == rows["wrongdot"][test], test
    assert rows["builtins"]["test_dot_product"] == "0"
    assert 0 < _total(graded, "builtins") <= _total(graded, "wrongdot")


def test_module_names_chosen_by_the_learner_are_never_imported(graded):
    assert _total(graded, "modname") == FULL
    assert graded["rows"]["modname"]["status"] == "ok"


def test_imports_of_the_reference_are_noted_however_made(graded):
    assert "course_lib.scoring" in _notes(graded, "importref")
    assert "reference implementation" not in _notes(graded, "honest")


# -- 3. one learner cannot take the class run down -----------------------------------------

def test_surrogates_are_escaped_not_fatal(graded):
    assert _total(graded, "surrogate") == FULL
    assert "\\ud800" in _stdout(graded, "surrogate")
    assert (graded["book"] / "feedback" / "surrogate.html").exists()


def test_outputs_are_capped(graded):
    assert len(graded["json"]) < 3_000_000
    assert len(json.dumps(graded["results"]["bigout"])) < 200_000
    assert len(json.dumps(graded["results"]["huge"])) < 50_000
    assert _total(graded, "bigout") == FULL and _total(graded, "huge") == FULL


def test_slow_cells_and_stopped_sandboxes_cost_only_their_author(graded):
    assert _total(graded, "stopself") == FULL  # stopped (or ignored) after its answers: nothing lost
    assert graded["rows"]["stopself"]["status"] in ("ok", "timeout")
    assert graded["rows"]["longcell"]["status"] in ("ok", "timeout")
    assert _total(graded, "longcell") == FULL


@pytest.mark.parametrize("student", ["symdir", "symfile", "symclass", "devzero", "fifo"])
def test_submissions_that_are_not_regular_files_are_refused(graded, student):
    row = graded["rows"][student]
    assert row["status"] == "refused"
    assert float(row["total"]) == 0.0
    assert "submit the notebook file itself" in _notes(graded, student)
