#!/usr/bin/env bash
# Regenerate the learner notebooks exercises/<assignment>/ from solutions/<assignment>/ with
# nbgrader (generate_assignment, no gradebook database), and the Chinese edition's
# zh/exercises/<assignment>/ from zh/solutions/<assignment>/ when that exists (it is built by
# `scripts/i18n.py build`). Deterministic: re-running gives no diff.
#   bash scripts/generate_exercises.sh                    # all assignments, both editions
#   bash scripts/generate_exercises.sh lesson03_scoring   # some
#   bash scripts/generate_exercises.sh --edition zh-CN    # one edition (en, zh-CN or zh-TW)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -m course_tools.grading_dev generate "$@"
