"""A grading worker process: grades submissions sent as JSON lines on stdin.

``course-grade --jobs N`` starts N workers. Each worker is a child subreaper: every
process a learner's code starts (even double-forked and detached with ``setsid``) is
re-parented to the worker, which kills all its descendants after each submission,
before the result goes back to the parent. Results travel on a private copy of the
original stdout; fd 1 itself is pointed at stderr so stray prints cannot corrupt them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from course_grader.notebook import Assignment
from course_grader.runner import grade_submission
from course_grader.sandbox import (Sandbox, SandboxConfig, fork_server_pids, kill_descendants, make_undumpable,
                                        set_child_subreaper)

__all__ = ["main"]


def _limit_memory(nbytes: int) -> None:
    """The grader's own memory limit (``RLIMIT_DATA``: heap and anonymous mappings): a test
    that would allocate without bound on a learner's result gets a MemoryError / torch
    allocation error, which fails that test, instead of the machine's OOM killer ending
    the class run."""
    import resource
    if nbytes > 0:
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (nbytes, nbytes))
        except (ValueError, OSError):
            pass


def main(memory_bytes: int = 0) -> None:
    set_child_subreaper()
    _limit_memory(memory_bytes)
    if os.geteuid() != 0:
        make_undumpable()  # sandboxes share our uid: keep them from ptracing the grader
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass
    assignments: dict[str, Assignment] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        reply: dict[str, Any]
        try:
            path = job["assignment"]
            if path not in assignments:
                assignments[path] = Assignment.load(path)
            notebooks = {k: (Path(v) if v else None) for k, v in job["notebooks"].items()}
            config = SandboxConfig(**job.get("config", {}))
            try:
                Sandbox.prepare(config)  # the fork server: started before the learner's clock starts
            except Exception:  # noqa: BLE001 - grade_submission reports it for this learner
                pass
            out.write(json.dumps({"started": True}) + "\n")
            out.flush()
            result = grade_submission(assignments[path], job["student"], notebooks, config=config,
                                      seed=job.get("seed"), diagnose=job.get("diagnose", True) is True)
            reply = {"result": result.to_dict()}
        except Exception as exc:  # noqa: BLE001 - reported as a grader error row
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            kill_descendants(fork_server_pids())  # everything but the fork server
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
