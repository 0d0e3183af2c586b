#!/usr/bin/env bash
# System pieces of the course, from Debian/Ubuntu packages and npm (scripts/setup.sh runs this
# as root or through sudo). Safe and fast to re-run: installs only what is missing.
#   bubblewrap         the grader's sandbox: course-grade runs learner code in it
#   libseccomp2        the sandbox's system-call filter (course_grader/policy.py)
#   chromium           the browser the class-hub test (tests/test_e2e_hub.py) drives
#   nodejs, npm        to install and run configurable-http-proxy, JupyterHub's proxy
#   fonts-wqy-microhei Chinese glyphs in figures (glossary terms, the Chinese edition)
#   python3-venv       the class hub's course environment is built from the system Python
#
#   sudo bash scripts/setup_system.sh             # install what is missing
#   bash scripts/setup_system.sh --check          # exit 1 and list what is missing
#   bash scripts/setup_system.sh --describe       # say what would be installed and why
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

declare -A WHY=(
  [bubblewrap]="the grader's sandbox (course-grade runs learner code in it)"
  [libseccomp2]="the sandbox's system-call filter"
  [chromium]="the browser the class-hub test drives"
  [nodejs]="runs configurable-http-proxy, JupyterHub's proxy"
  [npm]="installs configurable-http-proxy"
  [fonts-wqy-microhei]="Chinese glyphs in figures"
  [python3-venv]="the class hub's course environment"
  [configurable-http-proxy]="JupyterHub's proxy (from npm)"
)

have() {  # an executable file on PATH (not merely a name that resolves)
  local p
  p=$(command -v "$1" 2>/dev/null) && [ -f "$p" ] && [ -x "$p" ]
}

missing_debs() {
  local pkg out=()
  for pkg in bubblewrap libseccomp2 chromium nodejs fonts-wqy-microhei python3-venv; do
    case "$pkg" in
      # Ubuntu ships Chromium as chromium-browser (a snap); any chromium binary will do.
      chromium) have chromium || have chromium-browser || out+=(chromium) ;;
      nodejs) have node || out+=(nodejs) ;;
      bubblewrap) have bwrap || out+=(bubblewrap) ;;
      *) dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || out+=("$pkg") ;;
    esac
  done
  # Debian's nodejs package does not always bring npm (NodeSource's does).
  have npm || have configurable-http-proxy || out+=(npm)
  echo "${out[@]}"
}

missing=$(missing_debs)
need_chp=0
have configurable-http-proxy || need_chp=1

case "${1:-}" in
  --check)
    if [ -z "$missing" ] && [ "$need_chp" = 0 ]; then echo "system pieces: all present"; exit 0; fi
    for p in $missing; do echo "$p"; done
    [ "$need_chp" = 1 ] && echo "configurable-http-proxy"
    exit 1 ;;
  --describe)
    for p in $missing; do echo "  $p: ${WHY[$p]}"; done
    [ "$need_chp" = 1 ] && echo "  configurable-http-proxy: ${WHY[configurable-http-proxy]}"
    exit 0 ;;
  "") ;;
  *) echo "setup_system.sh: unknown option '$1'" >&2; exit 2 ;;
esac

if [ -z "$missing" ] && [ "$need_chp" = 0 ]; then
  echo "system pieces: all present (bubblewrap, libseccomp2, chromium, nodejs, npm, configurable-http-proxy, fonts-wqy-microhei, python3-venv)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup_system.sh installs Debian packages: run it as root (sudo bash scripts/setup_system.sh)" >&2
  exit 1
fi
if [ -n "$missing" ]; then
  echo "installing Debian packages: $missing"
  apt-get update -q
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing
fi
if [ "$need_chp" = 1 ]; then
  echo "installing configurable-http-proxy (npm)"
  npm install -g --no-fund --no-audit configurable-http-proxy
fi
chromium_bin=$(command -v chromium || command -v chromium-browser)
echo "system pieces ready: $("$chromium_bin" --version 2>/dev/null | head -1), node $(node --version)," \
     "configurable-http-proxy $(configurable-http-proxy --version), $(bwrap --version)"
