#!/usr/bin/env bash
# The Jupyter kernel of a course environment ("Python 3 (course)", named python3, inside the
# environment), so that notebooks opened with its JupyterLab run on its Python.
#   bash scripts/install_kernel.sh .venv/bin/python   (scripts/setup.sh, deploy/install.sh and the
#                                                     k8s image run it)
# ipykernel's installer stages the kernel in a tmpXXXX_kernels folder of the temporary directory
# and leaves that folder behind: it gets a temporary directory of its own, removed here.
set -euo pipefail
PY=${1:?usage: install_kernel.sh PYTHON}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TMPDIR=$tmp "$PY" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (course)" >/dev/null
