#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with everything the course needs.
#   bash scripts/setup.sh            # creates/updates .venv
#   PYTHON=python3.12 bash scripts/setup.sh
#   bash scripts/setup.sh --here     # install into the active Python (e.g. a conda env)
# Needs only the package registry (PyPI). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
HERE=0
[ "${1:-}" = "--here" ] && HERE=1

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"Python >= 3.11 is needed (nbgrader 0.9.6 requires it); found {sys.version.split()[0]}. "
             "Set PYTHON=python3.11 (or newer) and re-run.")
PY

if [ "$HERE" = 1 ]; then
  PY=$("$PYTHON" -c 'import sys; print(sys.executable)')
else
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  PY="$VENV/bin/python"
fi
PIP=("$PY" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip

# 1. torch first, CPU build. A plain `torch` would pull a multi-GB CUDA build.
#    TORCH_SPEC overrides (e.g. TORCH_SPEC="torch==2.14.1 torchvision==0.29.1").
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if ! "$PY" -c "import torch" 2>/dev/null; then
  # shellcheck disable=SC2086
  "${PIP[@]}" install -q $TORCH_SPEC || "${PIP[@]}" install -q torch --index-url https://download.pytorch.org/whl/cpu
fi

# 2. The course package, editable, with test tools (and the hub extra: jupyterhub, playwright).
"${PIP[@]}" install -q -e ".[dev,hub]"

# 3. d2l without its stale pins (numpy==1.23.5, matplotlib==3.7.2, jupyter==1.0.0 ...):
#    its code runs on current numpy/matplotlib; course_lib.d2l_compat handles torchvision.
"${PIP[@]}" install -q --no-deps "d2l==1.0.3"

# 4. A Jupyter kernel named after the course, so notebooks find this environment.
"$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null

"$PY" -c "import course_lib, torch; print(f'course_lib {course_lib.__version__} ready: torch {torch.__version__}, Python', __import__('sys').version.split()[0])"
# 5. The grader (course-grade) runs learner code under bubblewrap; it refuses to grade without it.
if ! command -v bwrap >/dev/null 2>&1; then
  echo "note: bubblewrap is not installed; course-grade needs it to grade a class (sudo apt-get install bubblewrap," \
       "or dnf install bubblewrap; see docs/GRADING.md). Learners' --check works without it."
fi
