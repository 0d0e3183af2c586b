#!/usr/bin/env bash
# Install PyTorch into one Python, choosing the build that fits the machine (issue 18):
#   * Linux without an NVIDIA GPU: the CPU build from PyTorch's own CPU index (a plain
#     `pip install torch` there pulls the CUDA build with several GB of nvidia-* wheels);
#     if that index does not answer within TORCH_PROBE_SECONDS (default 5), the default index;
#   * Linux with an NVIDIA GPU, and macOS: the default build from the default index.
# Overrides: TORCH_SPEC (what to install, default torch==2.13.0), TORCH_INDEX_URL (the index to
# use, no probing), TORCH_CPU_INDEX (the CPU index to probe). TORCH_DRY_RUN=1 prints the choice
# and the pip command instead of running it.
#   bash scripts/install_torch.sh .venv/bin/python
set -euo pipefail
PY=${1:?usage: install_torch.sh PYTHON}
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
