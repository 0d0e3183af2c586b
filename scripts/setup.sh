#!/usr/bin/env bash
# One-command set-up of the course (README "Quick start"). Safe and fast to re-run.
#
#   bash scripts/setup.sh              # everything the course and its test suite need:
#                                      #   .venv with the course, its test tools and the hub extra,
#                                      #   and the system pieces (below) on Debian/Ubuntu
#   bash scripts/setup.sh --learner    # only what the lessons and exercises need (no test,
#                                      #   development or hub tools, no system packages)
#   bash scripts/setup.sh --here       # install into the active Python (e.g. a conda env)
#   bash scripts/setup.sh --no-system  # skip the system packages
#   PYTHON=python3.12 bash scripts/setup.sh
#
# System pieces (Debian/Ubuntu packages, scripts/setup_system.sh): bubblewrap (the grader's
# sandbox), chromium (the browser the class-hub test drives), nodejs + npm and
# configurable-http-proxy (JupyterHub's proxy), fonts-wqy-microhei (Chinese text in figures),
# python3-venv. Installed as root directly, otherwise through sudo (it says so first); without
# either, the Python part is finished and the exact command for the rest is printed.
# Environment: TORCH_SPEC, TORCH_INDEX_URL (scripts/install_torch.sh), VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
HERE=0
PROFILE=full
SYSTEM=1
for arg in "$@"; do
  case "$arg" in
    --here) HERE=1 ;;
    --learner) PROFILE=learner; SYSTEM=0 ;;
    --no-system) SYSTEM=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (see: bash scripts/setup.sh --help)" >&2; exit 2 ;;
  esac
done
start=$(date +%s)

# --- 1. System pieces -------------------------------------------------------------------
system_note=""
if [ "$SYSTEM" = 1 ]; then
  if [ "$(uname -s)" = Darwin ]; then
    system_note="macOS: the lessons, the exercises and \`course-grade --check\` work here; grading a class
  (bubblewrap) and the class-hub test (JupyterHub with PAM users) need Linux, so the test suite
  skips those tiers and says so."
  elif ! command -v apt-get >/dev/null 2>&1; then
    system_note="this is not a Debian/Ubuntu system: install bubblewrap, chromium, nodejs, npm and a CJK font
  with your package manager (Fedora: sudo dnf install bubblewrap chromium nodejs npm wqy-microhei-fonts),
  then \`sudo npm install -g configurable-http-proxy\`. Until then the tests that need them are skipped."
  elif [ "$(id -u)" = 0 ]; then
    bash scripts/setup_system.sh
  elif bash scripts/setup_system.sh --check >/dev/null 2>&1; then
    :  # everything is there already
  elif command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
    echo "Installing system packages with sudo (scripts/setup_system.sh):"
    bash scripts/setup_system.sh --describe
    sudo bash scripts/setup_system.sh
  else
    system_note="the system pieces are not installed (no root, no usable sudo). The Python part is ready; as
  an administrator run:  sudo bash $(pwd)/scripts/setup_system.sh
  Missing: $(bash scripts/setup_system.sh --check 2>&1 | tr '\n' ' ' || true)
  Until then the test suite skips the tests that need them and names the missing piece."
  fi
fi

# --- 2. Python ----------------------------------------------------------------------------
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
PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')
PIP=("$PY" -m pip --disable-pip-version-check)

case "$PROFILE" in
  full) EXTRAS="[dev,hub,site]" ;;
  learner) EXTRAS="" ;;
esac
# What this environment was set up from: a re-run with nothing changed skips pip entirely.
STAMP=$( { cat pyproject.toml; echo "$PROFILE ${TORCH_SPEC:-} ${TORCH_INDEX_URL:-}"; "$PY" --version; } \
         | sha256sum | cut -c1-16)
STAMP_FILE=$PREFIX/.attention-course-setup
if [ "$(cat "$STAMP_FILE" 2>/dev/null)" = "$STAMP" ] && "$PY" -c "import course_lib, course_grader, d2l, torch" 2>/dev/null; then
  echo "Python environment $PREFIX is up to date (nothing to install)"
else
  # pip compiles every installed module to bytecode, one file after the other (~40 s for torch and
  # the rest): here it does not, and compileall does the same work below on every core.
  export PIP_COMPILE=false
  "${PIP[@]}" install -q --upgrade pip
  # torch first: the CPU build where there is no NVIDIA GPU (scripts/install_torch.sh says which).
  if [ -n "${TORCH_SPEC:-}${TORCH_INDEX_URL:-}" ] || ! "$PY" -c "import torch" 2>/dev/null; then
    bash scripts/install_torch.sh "$PY"
  fi
  # The course (course_lib + course_grader), editable, with the extras of this profile. Before
  # the distribution was named attention-course it was course_lib: drop that old registration.
  if "${PIP[@]}" show -q course_lib >/dev/null 2>&1; then "${PIP[@]}" uninstall -q -y course_lib; fi
  "${PIP[@]}" install -q -e ".$EXTRAS"
  # d2l without its stale pins (numpy==1.23.5, matplotlib==3.7.2, jupyter==1.0.0 ...): its code
  # runs on current numpy/matplotlib; course_lib.d2l_compat handles torchvision.
  "${PIP[@]}" install -q --no-deps "d2l==1.0.3"
  # The bytecode pip would have written (the grader's sandbox sees this environment read-only, so
  # a module without it would be compiled again in every sandbox); errors are those pip ignores
  # too (files of packages that are not Python 3 modules).
  "$PY" -m compileall -q -j 0 "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
  unset PIP_COMPILE
  # A Jupyter kernel for this environment, so notebooks find it.
  bash scripts/install_kernel.sh "$PY"
  echo "$STAMP" > "$STAMP_FILE"
fi
# JupyterLab's terminals get this environment's bin/ first on PATH (course-grade, nbgrader).
bash scripts/install_terminal.sh "$PREFIX"

"$PY" -c "import course_lib, torch, sys; print(f'course_lib {course_lib.__version__} ready in $PREFIX: torch {torch.__version__}, Python', sys.version.split()[0])"
# A CUDA build of torch on a machine without an NVIDIA GPU: said loudly, with the CPU build's command.
bash scripts/install_torch.sh --check-build "$PY"
echo "set-up took $(( $(date +%s) - start )) s"
if [ -n "$system_note" ]; then
  echo
  echo "note: $system_note"
fi
