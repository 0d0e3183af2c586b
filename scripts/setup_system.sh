#!/usr/bin/env bash
# System pieces for running a class on JupyterHub and for its end-to-end browser test
# (README "Run a class"). Run as root; safe to re-run (installs only what is missing).
#   Debian: chromium (the browser the e2e test drives), fonts-wqy-microhei (CJK glyphs for the
#           glossary's Chinese terms), nodejs + npm, bubblewrap (the grader's sandbox),
#           python3-venv (the course environment of the hub is built from Debian's Python)
#   npm:    configurable-http-proxy (JupyterHub's proxy)
# The PyPI pieces (jupyterhub, playwright) come with `pip install -e ".[dev,hub]"` (scripts/setup.sh).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup_system.sh installs Debian and npm packages: run it as root" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
missing=()
for pkg in chromium fonts-wqy-microhei nodejs bubblewrap python3-venv; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Debian's nodejs package does not always bring npm (NodeSource's does).
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if ! command -v configurable-http-proxy >/dev/null 2>&1; then
  npm install -g --no-fund --no-audit configurable-http-proxy
fi
echo "system pieces ready: $(chromium --version 2>/dev/null | head -1), node $(node --version), "\
"configurable-http-proxy $(configurable-http-proxy --version), $(bwrap --version)"
