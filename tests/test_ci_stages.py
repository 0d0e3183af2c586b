"""CI in stages (.ci/run) and the portability check's settings (scripts/check_portability.sh)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

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
