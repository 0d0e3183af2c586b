#!/usr/bin/env bash
# Install PyTorch into one Python, choosing the build that fits the machine (issue 18):
#   * Linux without an NVIDIA GPU: the CPU build from PyTorch's own CPU index (a plain
#     `pip install torch` there pulls the CUDA build with several GB of nvidia-* wheels);
#     if that index does not answer within TORCH_PROBE_SECONDS (default 5), the default index;
#   * Linux with an NVIDIA GPU, and macOS: the default build from the default index.
# After installing, it says loudly (on stderr, in a frame) when the torch it installed is a CUDA
# build on a machine without an NVIDIA GPU (the CPU index did not answer, or TORCH_INDEX_URL), with
# the command that gets the CPU build. `install_torch.sh --check-build PYTHON` only says that
# (scripts/setup.sh runs it on every set-up, so an environment made earlier is checked too).
# Overrides: TORCH_SPEC (what to install, default torch==2.13.0), TORCH_INDEX_URL (the index to
# use, no probing), TORCH_CPU_INDEX (the CPU index to probe). TORCH_DRY_RUN=1 prints the choice
# and the pip command instead of running it.
#   bash scripts/install_torch.sh .venv/bin/python
set -euo pipefail
check_only=0
if [ "${1:-}" = --check-build ]; then check_only=1; shift; fi
PY=${1:?usage: install_torch.sh [--check-build] PYTHON}
SPEC=${TORCH_SPEC:-torch==2.13.0}
CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
PROBE=${TORCH_PROBE_SECONDS:-5}

has_nvidia() {
  [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1 ||
    { command -v lspci >/dev/null 2>&1 && lspci 2>/dev/null | grep -qi 'vga.*nvidia\|3d.*nvidia'; }
}

reachable() {  # does the index answer (any HTTP status) within $PROBE seconds?
  "$PY" - "$1" "$PROBE" <<'PY' >/dev/null 2>&1
import sys, urllib.error, urllib.request
url, timeout = sys.argv[1].rstrip("/") + "/", float(sys.argv[2])
try:
    urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
except urllib.error.HTTPError:
    pass  # the server answered
PY
}

# A CUDA build where no NVIDIA GPU is: say so loudly, with the command that gets the CPU build.
warn_cuda_without_gpu() {
  [ "$(uname -s)" = Linux ] || return 0
  has_nvidia && return 0
  local info cuda version
  info=$("$PY" -c "import torch; print(torch.version.cuda or '', torch.__version__)" 2>/dev/null) || return 0
  cuda=${info%% *}
  version=${info##* }
  [ -n "$cuda" ] || return 0
  cat >&2 <<EOF

################################################################################
WARNING: torch $version is a CUDA $cuda build, but this machine has no NVIDIA GPU.
It runs on the CPU here, but its nvidia-* libraries take ~5 GB of disk and every
process that imports it reserves ~3 GB of address space (the CPU build: ~0.6 GB).
Get the CPU build (the same version) with:
  "$PY" -m pip install --force-reinstall --no-deps "torch==${version%%+*}+cpu" --index-url $CPU_INDEX
and remove the CUDA libraries with:
  "$PY" -m pip freeze | grep '^nvidia-' | cut -d= -f1 | xargs -r "$PY" -m pip uninstall -y
################################################################################

EOF
}

if [ "$check_only" = 1 ]; then
  warn_cuda_without_gpu
  exit 0
fi

index_args=()
unset cpu_first
if [ -n "${TORCH_INDEX_URL:-}" ]; then
  why="TORCH_INDEX_URL is set"
  index_args=(--index-url "$TORCH_INDEX_URL")
elif [ "$(uname -s)" != Linux ]; then
  why="$(uname -s): the default build"
elif has_nvidia; then
  why="an NVIDIA GPU is present: the default (CUDA) build"
elif reachable "$CPU_INDEX"; then
  why="Linux without an NVIDIA GPU: the CPU build from PyTorch's CPU index"
  index_args=(--index-url "$CPU_INDEX")
else
  why="Linux without an NVIDIA GPU, but PyTorch's CPU index ($CPU_INDEX) did not answer within ${PROBE} s: the default index"
  # A pinned version without a local label: ask the default index (a mirror or a wheel folder
  # may hold the CPU build) for its +cpu build first, and the plain pin (on PyPI, the CUDA
  # build) only if there is none.
  if [[ "$SPEC" =~ ^torch==[0-9.]+$ ]]; then
    cpu_first=("$PY" -m pip --disable-pip-version-check install -q "${SPEC}+cpu")
  fi
fi
# shellcheck disable=SC2206
cmd=("$PY" -m pip --disable-pip-version-check install -q ${SPEC} "${index_args[@]}")
echo "torch: $SPEC - $why"
if [ "${TORCH_DRY_RUN:-0}" = 1 ]; then
  [ -n "${cpu_first+x}" ] && echo "would try first: ${cpu_first[*]}"
  echo "would run: ${cmd[*]}"
  exit 0
fi
if [ -n "${cpu_first+x}" ] && "${cpu_first[@]}" 2>/dev/null; then
  echo "torch: installed ${SPEC}+cpu from the default index"
  exit 0
fi
"${cmd[@]}"
warn_cuda_without_gpu
