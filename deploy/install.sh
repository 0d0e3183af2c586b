#!/usr/bin/env bash
# Install the course for a class on this server (run as root, after scripts/setup_system.sh):
#   * a course environment in $COURSE_PREFIX/venv, built from Debian's /usr/bin/python3 so every
#     user can run it (a pyenv or conda Python under /root is not readable by learners): torch (CPU),
#     course_lib and its Jupyter/nbgrader stack, JupyterHub; registered as the `python3` kernel;
#     with nbgitpuller (the `hub` extra), so the course website's "Open in your class hub" links
#     (docs/WEBSITE.md) pull the course into a learner's home and open the lesson;
#   * the lessons, read-only, in $COURSE_PREFIX/lessons (each learner gets a copy on first login);
#   * JupyterLab defaults for the class ($COURSE_PREFIX/venv/share/jupyter/lab/settings);
#   * COURSE_LANGUAGE=zh-CN runs the class in Simplified Chinese: the Chinese lessons (zh/notebooks)
#     and JupyterLab's Chinese interface preset for everyone (deploy/course_language.py); then
#     create the course with `make_course.py --language zh-CN` (or the same COURSE_LANGUAGE);
#   * nbgrader's exchange directory $COURSE_EXCHANGE (writable by all, sticky, like /tmp).
# Safe to re-run: an up-to-date environment is kept (a stamp records what it was built from).
#
#   sudo bash deploy/install.sh
#   sudo COURSE_PREFIX=/opt/attention-course COURSE_EXCHANGE=/srv/nbgrader/exchange bash deploy/install.sh
#   sudo COURSE_LANGUAGE=zh-CN bash deploy/install.sh        # a class in Chinese
#   sudo COURSE_LANGUAGE=zh-TW bash deploy/install.sh        # a class in Traditional Chinese (zh-TW/)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
COURSE_PREFIX=${COURSE_PREFIX:-/opt/attention-course}
COURSE_EXCHANGE=${COURSE_EXCHANGE:-/srv/nbgrader/exchange}
BASE_PYTHON=${BASE_PYTHON:-/usr/bin/python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
COURSE_LANGUAGE=${COURSE_LANGUAGE:-en}

if [ "$(id -u)" != 0 ]; then
  echo "deploy/install.sh must run as root (it creates $COURSE_PREFIX and $COURSE_EXCHANGE)" >&2
  exit 1
fi
if ! "$BASE_PYTHON" -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "$BASE_PYTHON must be Python >= 3.11 with venv/ensurepip (Debian: apt-get install python3-venv)" >&2
  exit 1
fi

# The class language: its lessons and JupyterLab settings (a clear error for an unknown language
# or a Chinese edition that was not built), before anything is installed.
LESSONS=$("$BASE_PYTHON" -m deploy.course_language lessons --language "$COURSE_LANGUAGE")
OVERRIDES=$("$BASE_PYTHON" -m deploy.course_language overrides --language "$COURSE_LANGUAGE")

umask 022
VENV=$COURSE_PREFIX/venv
# pip builds a local project in its own folder (build/, *.egg-info): build from a copy, so
# the checkout stays as it was.
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
build_copy() {
  cp -r pyproject.toml README.md LICENSE course_lib course_grader course_tools "$BUILD/"
  find "$BUILD" -name __pycache__ -prune -exec rm -rf {} +
  echo "$BUILD"
}
# Two stamps: what the dependencies were installed from (a change rebuilds the environment)
# and what the course packages were installed from (a change reinstalls only them).
DEPS_STAMP=$( { cat pyproject.toml; echo "$TORCH_SPEC"; "$BASE_PYTHON" --version; } | sha256sum | cut -c1-16)
CODE_STAMP=$(find course_lib course_grader course_tools -name '*.py' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if [ "$(cat "$VENV/.course-deps" 2>/dev/null)" != "$DEPS_STAMP" ]; then
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv "$VENV"
  "${PIP[@]}" install --upgrade pip
  # torch first: the CPU build where there is no NVIDIA GPU (the same choice as scripts/setup.sh).
  TORCH_SPEC=$TORCH_SPEC bash scripts/install_torch.sh "$VENV/bin/python"
  # Not editable: the class runs a fixed copy of the course, not the instructor's work tree.
  "${PIP[@]}" install "$(build_copy)[hub]"
  "${PIP[@]}" install --no-deps "d2l==1.0.3"
  bash scripts/install_kernel.sh "$VENV/bin/python"
  echo "$DEPS_STAMP" > "$VENV/.course-deps"
  echo "$CODE_STAMP" > "$VENV/.course-code"
elif [ "$(cat "$VENV/.course-code" 2>/dev/null)" != "$CODE_STAMP" ]; then
  "${PIP[@]}" install --no-deps --force-reinstall "$(build_copy)"
  echo "$CODE_STAMP" > "$VENV/.course-code"
fi

# JupyterLab's terminals: the course environment first on PATH (a login shell resets it).
bash scripts/install_terminal.sh "$VENV"

# Lessons: a read-only reference copy; the hub copies them into each learner's home.
rm -rf "$COURSE_PREFIX/lessons"
mkdir -p "$COURSE_PREFIX/lessons"
# (which files are lessons: course_tools.lessons, the repository's one lesson glob)
"$BASE_PYTHON" -m course_tools.lessons list "$LESSONS" | while read -r lesson; do
  cp "$LESSONS/$lesson" "$COURSE_PREFIX/lessons/"
done
# Class-wide JupyterLab settings: render every cell of a notebook (no virtual scrolling), so
# "Run All" output and search behave the same for every learner; in a Chinese class, the
# Chinese interface (deploy/jupyter/lab-overrides.json + the locale, deploy/course_language.py).
mkdir -p "$VENV/share/jupyter/lab/settings"
printf '%s\n' "$OVERRIDES" > "$VENV/share/jupyter/lab/settings/overrides.json"
echo "$COURSE_LANGUAGE" > "$COURSE_PREFIX/language"

# nbgrader's exchange: every user may create files, only the owner may delete them.
mkdir -p "$COURSE_EXCHANGE"
chmod 1777 "$COURSE_EXCHANGE"

chmod -R a+rX "$COURSE_PREFIX"
echo "course installed in $COURSE_PREFIX (environment $VENV, exchange $COURSE_EXCHANGE, language $COURSE_LANGUAGE)"
