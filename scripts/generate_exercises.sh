#!/usr/bin/env bash
# Regenerate the learner notebooks exercises/<assignment>/ from solutions/<assignment>/ with
# nbgrader (generate_assignment, no gradebook database). Deterministic: re-running gives no diff.
#   bash scripts/generate_exercises.sh                    # all assignments
#   bash scripts/generate_exercises.sh lesson03_scoring   # some
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PYTHONPATH="$PWD/tests:$PWD${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m grading_dev generate "$@"
