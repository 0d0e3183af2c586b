#!/usr/bin/env bash
# JupyterLab's terminals start with this environment's commands first on PATH (issue 18), so
# that `course-grade --check scoring.ipynb`, `nbgrader` and `python` typed in a terminal of a
# server started as `.venv/bin/jupyter lab` (without activating anything) are the course's.
# Writes, into the environment PREFIX:
#   bin/course-terminal-shell   the user's shell ($SHELL), interactive, PATH=PREFIX/bin:$PATH
#                               (bash re-applies it after ~/.bashrc, which may reset PATH)
#   etc/jupyter/jupyter_server_config.json
#                               ServerApp.terminado_settings.shell_command -> that launcher
#   bash scripts/install_terminal.sh .venv        (scripts/setup.sh and deploy/install.sh run it)
set -euo pipefail
PREFIX=$(cd "${1:?usage: install_terminal.sh PREFIX}" && pwd)
BIN=$PREFIX/bin
mkdir -p "$BIN" "$PREFIX/etc/jupyter/jupyter_server_config.d" "$PREFIX/etc/attention-course"

cat > "$PREFIX/etc/attention-course/bashrc" <<RC
# Read by the course's JupyterLab terminals (bash): the user's usual start-up, then the
# course environment first on PATH. Written by scripts/install_terminal.sh.
[ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
[ -r "\$HOME/.bashrc" ] && . "\$HOME/.bashrc"
PATH="$BIN:\$PATH"
export PATH VIRTUAL_ENV="$PREFIX"
RC

cat > "$BIN/course-terminal-shell" <<SH
#!/bin/sh
# JupyterLab terminal of the course: your shell, with $BIN first on PATH.
# Written by scripts/install_terminal.sh.
PATH="$BIN:\$PATH"
VIRTUAL_ENV="$PREFIX"
export PATH VIRTUAL_ENV
shell=\${SHELL:-/bin/sh}
[ -x "\$shell" ] || shell=/bin/sh
case "\${shell##*/}" in
  bash) exec "\$shell" --rcfile "$PREFIX/etc/attention-course/bashrc" -i ;;
  *) exec "\$shell" -i ;;
esac
SH
chmod 755 "$BIN/course-terminal-shell"

# Server configuration of this environment (sys-prefix level), merged with what is there.
# (jupyter_server reads only extension switches from jupyter_server_config.d/, so the
# setting goes into jupyter_server_config.json itself.)
rm -f "$PREFIX/etc/jupyter/jupyter_server_config.d/attention-course-terminal.json"
PY=$PREFIX/bin/python
[ -x "$PY" ] || PY=python3
"$PY" - "$PREFIX/etc/jupyter/jupyter_server_config.json" "$BIN/course-terminal-shell" <<'PY'
import json, sys
from pathlib import Path
path, launcher = Path(sys.argv[1]), sys.argv[2]
config = json.loads(path.read_text()) if path.exists() else {}
config.setdefault("ServerApp", {}).setdefault("terminado_settings", {})["shell_command"] = [launcher]
path.write_text(json.dumps(config, indent=2) + "\n")
PY
