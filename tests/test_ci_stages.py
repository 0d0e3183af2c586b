"""CI in stages (.ci/run) and the portability check's settings (scripts/check_portability.sh)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from course_tools import tiers as _tiers

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci" / "run"


def _claim() -> list[str]:
    match = re.search(r"^claim=\(([^)]*)\)", CI.read_text(), re.M)
    assert match, ".ci/run has no claim=(...) list of tiers"
    return match[1].split()


def test_every_tier_runs_in_one_ci_stage() -> None:
    # e2e tests are system tests too (the root conftest adds the marker), so the system stage runs them
    assert set(_claim()) == set(_tiers.TIERS) - {"e2e"}
    assert len(_claim()) == len(set(_claim()))


def _expr(tier: str) -> str:
    script = (f"source <(sed -n '/^claim=/,/^}}/p' {CI}); expr_for {tier}")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_a_test_with_two_tiers_runs_in_the_stage_that_claims_it_first() -> None:
    assert _expr("system") == "system"
    assert _expr("sandbox") == "sandbox and not (system or browser or notebooks)"
    assert _expr("fast").startswith("fast and not (system or browser or notebooks or sandbox or slow")


def test_a_failing_stage_is_named() -> None:
    result = subprocess.run(["bash", str(CI), "checkout", "no_such_stage"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "CI stage checkout passed" in result.stdout
    assert "CI FAILED in stage 'no_such_stage'" in result.stdout
    assert "unknown stage 'no_such_stage'; choose from: setup lint" in result.stderr


def test_portability_skips_a_setting_that_repeats_the_machine_default(tmp_path: Path) -> None:
    # a stand-in interpreter: the probe reports 2 threads unless OMP_NUM_THREADS says otherwise, and
    # AVX2 kernels whatever ATEN_CPU_CAPABILITY asks (a CPU without AVX-512); its "pytest" fails
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nif [ "$1" = -c ]; then echo "AVX2 ${OMP_NUM_THREADS:-2} ${MKL_CBWR:-auto}"; exit 0; fi\n'
                    'if [ "$2" = course_tools.lessons ]; then shift 3; for f; do echo "$f"; done; exit 0; fi\n'
                    'echo "pytest ran with OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"; exit 1\n')
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "NOTEBOOKS": "nothing.ipynb"}
    env.pop("OMP_NUM_THREADS", None)
    env.pop("MKL_CBWR", None)
    result = subprocess.run(["bash", str(ROOT / "scripts" / "check_portability.sh"), "aten_avx2", "threads1"],
                            capture_output=True, text=True, env=env, timeout=120)
    out = result.stdout
    assert "aten_avx2: skipped (ATEN_CPU_CAPABILITY=avx2 gives this machine's default again" in out, out
    assert "threads1: FAILED (OMP_NUM_THREADS=1)" in out, out  # a different setting runs
    assert "pytest ran with OMP_NUM_THREADS=1" in out
    assert result.returncode == 1


def _plan() -> list[str]:
    match = re.search(r"^plan=\((.*)\)$", CI.read_text(), re.M)
    assert match, ".ci/run has no plan=(...) of steps"
    return [quoted or bare for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', match[1])]


def _stages_of(step: str) -> tuple[int, list[str]]:
    """(how many run at once, the stage names) of a step: a pool ("N workers: ..."), lanes or one lane."""
    pool = re.fullmatch(r"(\d+) workers?: *(.*)", step)
    if pool:
        return int(pool[1]), pool[2].split()
    return len(step.split("|")), step.replace("|", " ").split()


def test_the_default_plan_runs_every_stage_once_with_three_at_a_time_at_most() -> None:
    stages = re.search(r"^all=\(([^)]*)\)", CI.read_text(), re.M)
    splittable = re.search(r"^splittable=\(([^)]*)\)", CI.read_text(), re.M)
    assert stages and splittable
    steps = _plan()
    assert steps[0] == "setup" and steps[-1] == "checkout"
    # two cores: three at a time at most (several stages mostly wait), and lint the first test stage
    assert all(_stages_of(step)[0] <= 3 for step in steps), steps
    named = [s for step in steps for s in _stages_of(step)[1]]
    assert [s for s in named if s not in ("setup", "checkout")][0] == "lint", named
    # each stage once: whole, or as all of its parts I/N, I = 1..N, and only a stage that can run in parts
    whole = [s for s in named if "@" not in s]
    parts: dict[str, list[str]] = {}
    for s in named:
        if "@" in s:
            stage, part = s.split("@")
            parts.setdefault(stage, []).append(part)
    assert set(parts) <= set(splittable[1].split()), parts
    for stage, got in parts.items():
        count = int(got[0].split("/")[1])
        assert sorted(got) == sorted(f"{i}/{count}" for i in range(1, count + 1)), (stage, got)
    assert sorted(whole + list(parts)) == sorted(stages[1].split()), named


def test_a_pool_runs_every_stage_once_and_takes_none_after_a_failure(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(["bash", str(CI), "2 workers: checkout checkout checkout"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("=== CI stage checkout passed") == 3, result.stdout
    # one worker: the queue in order; the failure stops it, the stage after it never starts
    result = subprocess.run(["bash", str(CI), "1 worker: checkout no_such_stage checkout", "checkout"],
                            capture_output=True, text=True, timeout=120, env=env)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr
    assert out.count("=== CI stage checkout started") == 1, out
    assert "=== CI FAILED in stage 'no_such_stage' (exit 2, " in out


@pytest.mark.parametrize("stage, message", [
    ("fairness@4/3", "stage 'fairness@4/3': a part is STAGE@I/N, part I of N with 1 <= I <= N"),
    ("fairness@0/3", "stage 'fairness@0/3': a part is STAGE@I/N"),
    ("fairness@one", "stage 'fairness@one': a part is STAGE@I/N"),
    ("checkout@1/2", "stage 'checkout' does not run in parts; these do: fast content"),
])
def test_a_part_that_cannot_be_had_is_refused_before_anything_runs(tmp_path: Path, stage: str, message: str) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(["bash", str(CI), stage], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr, result.stderr
    assert f"=== CI FAILED in stage '{stage}' (exit 2, " in result.stdout


def test_two_lanes_run_side_by_side_and_a_failure_names_its_stage(tmp_path: Path) -> None:
    # lane one fails at once (an unknown stage) and starts no other stage; lane two finishes its
    # stage; the run exits with the failure's code, names the stage and keeps the logs it names
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(["bash", str(CI), "no_such_stage checkout | checkout", "checkout"],
                            capture_output=True, text=True, timeout=120, env=env)
    out = result.stdout
    assert result.returncode == 2, out + result.stderr
    assert out.count("=== CI stage checkout passed") == 1, out  # lane two's; lane one stopped, step three never ran
    assert "=== CI stage no_such_stage FAILED (exit 2)" in out
    log = next(tmp_path.glob("course-ci-*/no_such_stage.log"))
    # the stage's log is printed whole, under its name, and kept where the summary says
    assert f"=== CI stage no_such_stage: its output ({log})\nunknown stage 'no_such_stage'" in out, out
    assert "=== CI FAILED in stage 'no_such_stage' (exit 2, " in out
    assert f"the stages' logs: {log.parent}" in out
    assert "  no_such_stage: FAILED (exit 2) after" in out and "  checkout: " in out


def test_a_passing_run_prints_each_stages_times_and_leaves_no_logs(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(["bash", str(CI), "checkout | checkout | checkout"], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"=== CI passed in \d+ s wall:\n(  checkout: \d+ s wall, \d+ s CPU\n){3}$", result.stdout), result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # collects the fairness file (imports torch): ~3 s of CPU
def test_the_slow_tier_runs_once_split_between_the_slow_and_fairness_stages() -> None:
    text = CI.read_text()
    fairness = re.search(r"^fairness=(\S+)$", text, re.M)
    assert fairness and (ROOT / fairness[1]).is_file()
    # slow: the tier over tests/ less the file; fairness: the tier in the file (together, the tier once)
    assert '-m "$(expr_for slow)" --ignore="$fairness" tests ;;' in text
    assert '-m "$(expr_for slow)" "$fairness" ;;' in text
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                          "--collect-only", "-q", "-m", _expr("slow"), fairness[1]],
                         capture_output=True, text=True, cwd=ROOT, timeout=300).stdout
    collected = [line for line in out.splitlines() if "::" in line]
    assert len(collected) > 100 and all(t.startswith(fairness[1] + "::") for t in collected), out[-2000:]


def _portability_with_lessons(tmp_path: Path, unpinned: str, lister_fails: bool = False) -> subprocess.CompletedProcess:
    # a stand-in interpreter: 2 threads by default; its lesson lister names the notebooks in
    # UNPINNED (or fails); its "pytest" prints the notebooks it was given and passes
    fake = tmp_path / "python"
    lister = "exit 3" if lister_fails else f'for f in {unpinned}; do echo "$f"; done; exit 0'
    fake.write_text('#!/bin/sh\nif [ "$1" = -c ]; then echo "AVX2 ${OMP_NUM_THREADS:-2} auto"; exit 0; fi\n'
                    f'if [ "$2" = course_tools.lessons ]; then {lister}; fi\n'
                    'shift 6; echo "pytest ran on: $*"; exit 0\n')
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "NOTEBOOKS": "a.ipynb b.ipynb c.ipynb"}
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.run(["bash", str(ROOT / "scripts" / "check_portability.sh"), "default", "threads1"],
                          capture_output=True, text=True, env=env, timeout=120)


def test_thread_settings_skip_the_lessons_that_fix_their_thread_count(tmp_path: Path) -> None:
    result = _portability_with_lessons(tmp_path, "a.ipynb c.ipynb")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "pytest ran on: a.ipynb b.ipynb c.ipynb" in out  # the default setting runs every lesson
    assert "pytest ran on: a.ipynb c.ipynb\n" in out, out  # threads1: b fixes its threads
    assert "threads1: passed in" in out and "(not run again: 1 lesson(s) fixing their thread count" in out


def test_thread_settings_stop_loudly_when_the_lessons_cannot_be_read(tmp_path: Path) -> None:
    result = _portability_with_lessons(tmp_path, "", lister_fails=True)
    assert result.returncode == 1
    assert "threads1: FAILED (python -m course_tools.lessons unpinned could not read the notebooks)" in result.stdout
