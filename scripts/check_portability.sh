#!/usr/bin/env bash
# Portability check: run the lesson notebooks under nbval with settings that change
# floating-point results on one machine (thread counts, MKL and ATen code paths), so that a
# committed output that only holds on the machine that made it is caught here, not on a
# learner's laptop.
#
#   bash scripts/check_portability.sh                 # every setting, every notebook
#   bash scripts/check_portability.sh threads1 avx2   # some settings
#   NOTEBOOKS="notebooks/03_*.ipynb" bash scripts/check_portability.sh
#   CELL_TIMEOUT=1800 bash scripts/check_portability.sh   # on a very busy machine
#
# Settings (name: environment):
#   default      : none (the machine's own thread count and vector unit)
#   threads1     : OMP_NUM_THREADS=1
#   threads2     : OMP_NUM_THREADS=2
#   threads4     : OMP_NUM_THREADS=4
#   mkl_avx2     : MKL_CBWR=AVX2         (only where the CPU has AVX2)
#   mkl_avx512   : MKL_CBWR=AVX512       (only where the CPU has AVX-512)
#   mkl_compat   : MKL_CBWR=COMPATIBLE
#   aten_avx2    : ATEN_CPU_CAPABILITY=avx2   (only where the CPU has AVX2)
#   aten_default : ATEN_CPU_CAPABILITY=default (no vector kernels at all)
# A setting that gives this machine's own configuration again is skipped, saying so: its run
# would repeat the default one (on a CPU without AVX-512, ATen already picks its AVX2 kernels,
# so aten_avx2 changes nothing; on one core, threads1 changes nothing). What is compared: ATen's
# chosen kernels, torch's thread count and the MKL_CBWR setting. `default` always runs. The thread
# settings skip the lessons that fix torch's thread count in their first cell
# (course_tools.lessons.pinned_threads): their results cannot depend on it.
# Prints one line per setting and exits non-zero if any setting fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
NOTEBOOKS=${NOTEBOOKS:-notebooks/*.ipynb}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# per-cell time limit in seconds, the test suite's too (a hang still stops; a busy machine does not fail a right lesson)
CELL_TIMEOUT=${CELL_TIMEOUT:-900}

flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }

env_of() {
  case "$1" in
    default) echo "" ;;
    threads1) echo "OMP_NUM_THREADS=1" ;;
    threads2) echo "OMP_NUM_THREADS=2" ;;
    threads4) echo "OMP_NUM_THREADS=4" ;;
    mkl_avx2) has avx2 && echo "MKL_CBWR=AVX2" || echo "SKIP" ;;
    mkl_avx512) has avx512f && echo "MKL_CBWR=AVX512" || echo "SKIP" ;;
    mkl_compat) echo "MKL_CBWR=COMPATIBLE" ;;
    aten_avx2) has avx2 && echo "ATEN_CPU_CAPABILITY=avx2" || echo "SKIP" ;;
    aten_default) echo "ATEN_CPU_CAPABILITY=default" ;;
    *) echo "BAD" ;;
  esac
}

all=(default threads1 threads2 threads4 mkl_avx2 mkl_avx512 mkl_compat aten_avx2 aten_default)
settings=("$@")
[ ${#settings[@]} -eq 0 ] && settings=("${all[@]}")

# what torch runs with under a setting: kernels (ATen capability), threads, MKL's code path
effective() {
  # shellcheck disable=SC2086
  env $1 "$PY" -c 'import os, torch; print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads(), os.environ.get("MKL_CBWR", "auto"))'
}
machine=$(effective "")

failed=0
summary=()
for s in "${settings[@]}"; do
  e=$(env_of "$s")
  if [ "$e" = "BAD" ]; then echo "unknown setting '$s'; choose from: ${all[*]}" >&2; exit 2; fi
  if [ "$e" = "SKIP" ]; then summary+=("$s: skipped (this CPU lacks the instruction set)"); continue; fi
  if [ "$s" != default ] && [ "$(effective "$e")" = "$machine" ]; then
    summary+=("$s: skipped (${e} gives this machine's default again: kernels, threads, MKL path = $machine)")
    continue
  fi
  # shellcheck disable=SC2206  # NOTEBOOKS is a glob
  run=($NOTEBOOKS)
  note=""
  if [[ "$s" == threads* ]]; then
    # a lesson that fixes torch's thread count in its first cell gives the same results under
    # every thread setting: running it again would only repeat the default run
    # shellcheck disable=SC2086
    if ! listed=$("$PY" -m course_tools.lessons unpinned $NOTEBOOKS 2>/dev/null); then
      summary+=("$s: FAILED (python -m course_tools.lessons unpinned could not read the notebooks)")
      failed=1
      continue
    fi
    mapfile -t run < <(printf '%s' "$listed" | grep -v '^$')
    pinned=$(( $(echo $NOTEBOOKS | wc -w) - ${#run[@]} ))
    [ "$pinned" -gt 0 ] && note=" (not run again: $pinned lesson(s) fixing their thread count in their first cell)"
    if [ ${#run[@]} -eq 0 ]; then summary+=("$s: skipped (every notebook fixes its thread count)"); continue; fi
  fi
  echo "=== portability setting $s: ${e:-(machine default)}$note"
  start=$(date +%s)
  # shellcheck disable=SC2086
  if env $e "$PY" -m pytest -q -p no:cacheprovider --nbval-cell-timeout="$CELL_TIMEOUT" "${run[@]}"; then
    summary+=("$s: passed in $(( $(date +%s) - start )) s$note")
  else
    summary+=("$s: FAILED (${e})")
    failed=1
  fi
done
echo "=== portability summary"
printf '%s\n' "${summary[@]}"
exit $failed
