"""Run the first code cells of a lesson that loads shipped checkpoints, with its CKPT_DIR moved.

Lessons 4 and 11 check the recorded recipe and vocabularies before they load shipped weights. The
tests feed them a tampered ``meta.json`` in a temporary folder and expect the lesson's own assert
to refuse it: :func:`run_lesson_head` writes the cells, with the line that sets ``CKPT_DIR``
pointed at that folder, to a file there (so the traceback shows the failed line) and runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_lesson_head(cells: list[str], ckpt_line: str, folder: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``cells`` as one program with ``ckpt_line`` (in the last cell) replaced to point at ``folder``."""
    last = cells[-1].replace(ckpt_line, f"CKPT_DIR = Path({str(folder)!r})")
    assert last != cells[-1], f"the lesson no longer sets CKPT_DIR as this test expects: {ckpt_line}"
    program = folder / "lesson_head.py"
    program.write_text("\n".join(["get_ipython = None", "display = print", *cells[:-1], last]))
    return subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "COURSE_SEED": "0", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"})


def assert_lesson_refuses(cells: list[str], ckpt_line: str, meta: dict, changes: list[tuple[Callable[[dict], Any], str]],
                          tmp_path: Path, cwd: Path) -> None:
    """For each (change, message): the lesson's first cells, given ``meta`` changed so, fail on an
    assert whose line or message contains ``message``."""
    for change, message in changes:
        folder = tmp_path / message.replace(" ", "_")
        folder.mkdir()
        broken = json.loads(json.dumps(meta))
        change(broken)
        (folder / "meta.json").write_text(json.dumps(broken))
        run = run_lesson_head(cells, ckpt_line, folder, cwd)
        assert run.returncode != 0 and "AssertionError" in run.stderr, run.stderr[-600:]
        assert message in run.stderr, run.stderr[-600:]   # the failed assert's line or message names it
