"""The set-up scripts as users meet them (issue 18).

* ``scripts/install_torch.sh`` chooses PyTorch's CPU index on Linux without an NVIDIA GPU,
  falls back to the default index within seconds when that index does not answer, keeps the
  default build where there is a GPU, and obeys ``TORCH_INDEX_URL`` (dry runs: nothing is
  installed, no address outside this machine is contacted).
* A terminal opened in JupyterLab the way JupyterLab opens it (REST ``POST /api/terminals``,
  then the terminal's websocket), in a server started as the README starts it
  (``.venv/bin/jupyter lab`` without activating anything), finds ``course-grade``.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

TIER = "fast"  # course_tools/tiers.py

REPO = Path(__file__).resolve().parents[1]
INSTALL_TORCH = REPO / "scripts" / "install_torch.sh"


def _choose(tmp_path: Path, **env: str) -> tuple[str, float]:
    full = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path), "TORCH_DRY_RUN": "1", **env}
    t = time.monotonic()
    out = subprocess.run(["bash", str(INSTALL_TORCH), sys.executable], capture_output=True, text=True,
                         env=full, timeout=120, check=True).stdout
    return out, time.monotonic() - t


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU-index choice is made on Linux only")
@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"), reason="this machine has an NVIDIA GPU")
def test_torch_cpu_index_when_it_answers(tmp_path):
    class Index(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/whl/cpu"
        out, _ = _choose(tmp_path, TORCH_CPU_INDEX=url)
    finally:
        server.shutdown()
    assert "CPU build from PyTorch's CPU index" in out
    assert f"--index-url {url}" in out and "torch==2.13.0" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU-index choice is made on Linux only")
@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"), reason="this machine has an NVIDIA GPU")
def test_torch_falls_back_within_seconds_when_the_cpu_index_is_unreachable(tmp_path):
    out, seconds = _choose(tmp_path, TORCH_CPU_INDEX=f"http://127.0.0.1:{_closed_port()}/whl/cpu",
                           TORCH_PROBE_SECONDS="5")
    assert "did not answer" in out and "--index-url" not in out, out
    # the default index is asked for the CPU build first (a mirror or wheel folder may hold it)
    assert "would try first:" in out and "torch==2.13.0+cpu" in out, out
    assert seconds < 15, f"the fallback took {seconds:.1f} s"


def test_torch_default_build_where_there_is_an_nvidia_gpu(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    out, _ = _choose(tmp_path)
    if sys.platform.startswith("linux"):
        assert "NVIDIA GPU is present" in out
    assert "--index-url" not in out, out


def test_torch_index_and_spec_overrides(tmp_path):
    out, _ = _choose(tmp_path, TORCH_INDEX_URL="http://127.0.0.1:9/simple", TORCH_SPEC="torch==2.14.1")
    assert "TORCH_INDEX_URL is set" in out
    assert "install -q torch==2.14.1 --index-url http://127.0.0.1:9/simple" in out


def _fake_python(tmp_path: Path, cuda: str) -> Path:
    """A stand-in Python for install_torch.sh: ``-m pip`` records its arguments and succeeds
    (nothing is installed), ``-c`` answers what torch says of its build (``cuda``: the CUDA version
    of a CUDA build, empty for the CPU build)."""
    fake = tmp_path / "fake-python"
    log = tmp_path / "pip.log"
    fake.write_text(f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = pip ]; then echo "$@" >> {log}; exit 0; fi
if [ "$1" = -c ]; then echo "{cuda} 2.13.0{'+cu' + cuda.replace('.', '') if cuda else '+cpu'}"; exit 0; fi
exit 1
""")
    fake.chmod(0o755)
    return fake


def _install(tmp_path: Path, python: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path),
           "TORCH_INDEX_URL": "http://127.0.0.1:9/simple"}  # no probing, and pip is the stand-in's
    return subprocess.run(["bash", str(INSTALL_TORCH), *args, str(python)], capture_output=True, text=True,
                          env=env, timeout=120, check=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU-index choice is made on Linux only")
@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None,
                    reason="this machine has an NVIDIA GPU")
def test_a_cuda_build_on_a_machine_without_gpu_is_said_loudly_with_the_cpu_command(tmp_path):
    """Issue 29: the default index gave torch 2.13.0+cu130 (5.8 GB) without a word."""
    proc = _install(tmp_path, _fake_python(tmp_path, "13.0"))
    assert "install -q torch==2.13.0" in (tmp_path / "pip.log").read_text()  # it did install
    warning = proc.stderr
    assert "WARNING: torch 2.13.0+cu130 is a CUDA 13.0 build, but this machine has no NVIDIA GPU" in warning, warning
    assert "--force-reinstall --no-deps \"torch==2.13.0+cpu\" --index-url https://download.pytorch.org/whl/cpu" in warning
    # setup.sh's check of an environment made earlier says the same
    assert "is a CUDA 13.0 build" in _install(tmp_path, _fake_python(tmp_path, "13.0"), "--check-build").stderr
    # the CPU build, or a CUDA build where a GPU is: nothing to say
    assert "WARNING" not in _install(tmp_path, _fake_python(tmp_path, "")).stderr
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    assert "WARNING" not in _install(tmp_path, _fake_python(tmp_path, "13.0")).stderr


def test_setup_checks_the_torch_build_on_every_run():
    text = (REPO / "scripts" / "setup.sh").read_text()
    assert 'bash scripts/install_torch.sh --check-build "$PY"' in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _terminal_says(port: int, token: str, name: str, command: str, marker: str, timeout: float) -> str:
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(f"ws://127.0.0.1:{port}/terminals/websocket/{name}?token={token}")
    seen = ""
    await ws.write_message(json.dumps(["stdin", command + "\r"]))
    deadline = time.monotonic() + timeout
    while marker not in seen.replace(command, ""):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            msg = await asyncio.wait_for(ws.read_message(), timeout=left)
        except asyncio.TimeoutError:
            break
        if msg is None:
            break
        kind, *rest = json.loads(msg)
        if kind == "stdout":
            seen += rest[0]
    ws.close()
    return seen


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="JupyterLab terminals need a POSIX shell")
def test_jupyterlab_terminal_finds_course_grade(tmp_path):
    prefix = Path(sys.prefix)
    launcher = prefix / "bin" / "course-terminal-shell"
    config = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    assert launcher.exists() and "course-terminal-shell" in (config.read_text() if config.exists() else ""), (
        f"{launcher} or {config} is missing: run `bash scripts/setup.sh` (it runs scripts/install_terminal.sh)")
    assert (prefix / "bin" / "course-grade").exists()
    bash = shutil.which("bash") or "/bin/bash"
    port, token = _free_port(), "course-terminal-test"
    env = {  # a learner who did not activate the environment: its bin/ is not on PATH
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": bash, "LANG": "C.UTF-8",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
    }
    (tmp_path / ".bashrc").write_text("PATH=/usr/bin:/bin  # a .bashrc that resets PATH\n")
    log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [str(prefix / "bin" / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("jupyter lab did not start:\n" + (tmp_path / "server.log").read_text()[-3000:])
                time.sleep(0.5)
        req = urllib.request.Request(f"{base}/api/terminals?token={token}", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        name = json.load(urllib.request.urlopen(req, timeout=30))["name"]
        out = asyncio.run(_terminal_says(port, token, name, "command -v course-grade; echo DONE-$?",
                                         "DONE-", timeout=60))
    finally:
        for sig, wait in ((15, 30), (9, 10)):
            try:
                os.killpg(server.pid, sig)
                server.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()
    assert "DONE-0" in out, f"`command -v course-grade` failed in a JupyterLab terminal:\n{out[-2000:]}"
    assert f"{prefix}/bin/course-grade" in out
