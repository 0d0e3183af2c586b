"""The environment preflight: an environment failure is the grader's, never a learner's grade.

Before anyone is graded, one sandbox runs a known-good notebook the way learners' notebooks
run: ``course-grade`` grades the answer key's own solution in a grading worker (the same
worker, fork server and limits the class then uses), ``course-grade --check`` runs
:data:`course_grader.policy.PREFLIGHT_CELL` in a sandbox. If the sandbox cannot start, dies,
runs out of time, or the solution does not earn its full marks, the run stops before it
writes anything, with one message that names the cause and the fix
(:class:`EnvironmentFailure`).
"""

from __future__ import annotations

from course_grader import policy
from course_grader.i18n import N_, gettext_for, translate_message
from course_grader.sandbox import Sandbox, SandboxConfig, SandboxDied, SandboxStartFailed

__all__ = ["EnvironmentFailure", "judge_answer_key_run", "check_sandbox"]

#: Said after every failure of a teacher's run.
NOTHING_WRITTEN = N_("no learner was graded and no grade file was written")
#: A teacher's run that cannot grade: the cause, and the fix when there is one.
ENVIRONMENT_BROKEN = N_("the grading environment does not work, so {nothing}: {cause}.")
ENVIRONMENT_BROKEN_FIX = N_("the grading environment does not work, so {nothing}: {cause}. Fix: {fix}")
FIX_SETUP = N_("repair the Python environment (bash scripts/setup.sh) and run again.")


class EnvironmentFailure(RuntimeError):
    """The grading environment cannot grade: the message says the cause and the fix.

    Made from a marked message (``N_``) and its fields, so that it can be shown in the
    teacher's or the learner's language (:meth:`translated`); ``str()`` is the English."""

    def __init__(self, message: str, **fields: str) -> None:
        self.template, self.fields = message, fields
        super().__init__(message.format(**fields) if fields else message)

    def translated(self, language: str | None) -> str:
        """The message in ``language`` (each field translated in turn, as translate_message does)."""
        if not self.fields:
            return translate_message(self.template, language)
        return gettext_for(language)(self.template).format(
            **{k: translate_message(str(v), language) for k, v in self.fields.items()})


def _one_line(text: str, limit: int = 600) -> str:
    clean = "".join(ch if ch.isprintable() else " " for ch in str(text).replace("\n", " | "))
    return " ".join(clean.split())[:limit]


def judge_answer_key_run(result: dict) -> str:
    """Judge the grading of the answer key's own solution (a ``SubmissionResult`` as a dict).

    Returns:
        A one-line summary (``"the answer key's solution: 15/15 in 0.4 s"``).

    Raises:
        EnvironmentFailure: the sandbox could not start or died, a cell of the solution failed or
            ran out of time, or the solution did not earn every point.
    """
    # written answers (graded by hand) are not the grader's to give: the best is the auto-graded points
    pending = result.get("pending_manual", 0)
    pending = pending if isinstance(pending, (int, float)) and not isinstance(pending, bool) else 0
    total, best = result.get("total", 0), round(result.get("max_total", 0) - pending, 4)
    problems: list[str] = []
    for nb in result.get("notebooks", []):
        for cell in nb.get("cells", []):
            status = cell.get("status")
            if status not in ("ok", None):
                problems.append(f"cell {cell.get('index', '?')}: {status}: {cell.get('message', '')}")
        for test in nb.get("tests", []):
            if not test.get("passed"):
                problems.append(f"{test.get('grade_id')}: {test.get('message', '')}")
        notes = [n for n in nb.get("notes", []) if "could not start" in n or "died" in n or "did not" in n]
        problems[:0] = notes
    status = str(result.get("status", ""))
    if status == "ok" and not problems and total == best:
        return N_("the answer key's own solution earns {total}/{best} in a sandbox ({seconds} s)").format(
            total=f"{total:g}", best=f"{best:g}", seconds=f"{result.get('duration', 0):.1f}")
    first = _one_line(problems[0] if problems else status, 400)   # the cause stays translatable (i18n.MAX_MATCHED)
    if "could not start" in first or "did not start" in first:
        # the sandbox's own message names the fix
        raise EnvironmentFailure(ENVIRONMENT_BROKEN, nothing=NOTHING_WRITTEN, cause=first)
    if status in ("sandbox died", "timeout") or "died" in first or "did not finish" in first:
        cause = N_("the sandbox died or ran out of time on the answer key's own solution ({problem})").format(
            problem=first)
        fix = N_("grade with more room (--memory-mb, --cell-timeout) or on a less loaded machine; "
                 "`course-grade --check` on the solution shows the same failure.")
    elif status == "grader error":
        cause = N_("the grader failed on the answer key's own solution ({error})").format(error=first)
        fix = FIX_SETUP
    else:
        cause = N_("the answer key's own solution earns {total}/{best} here, not {best} ({problem})").format(
            total=f"{total:g}", best=f"{best:g}", problem=first)
        fix = N_("the answer key or this environment is wrong (a different torch or numpy than the course's?): "
                 "run `course-grade --check` on the solution, repair it, and grade again.")
    raise EnvironmentFailure(ENVIRONMENT_BROKEN_FIX, nothing=NOTHING_WRITTEN, cause=cause, fix=fix)


def check_sandbox(config: SandboxConfig) -> str:
    """For ``course-grade --check``: run :data:`policy.PREFLIGHT_CELL` in one sandbox.

    Returns:
        What ran (one line).

    Raises:
        EnvironmentFailure: the sandbox cannot start or the cell fails; the message tells the
            learner what to do.
    """
    sandbox = Sandbox(config)
    try:
        try:
            sandbox.start()
            reply = sandbox.request({"op": "exec", "cell": 0, "source": policy.PREFLIGHT_CELL, "ipython": False},
                                    config.cell_timeout, "the environment check")
        except SandboxStartFailed as exc:
            raise EnvironmentFailure(LEARNER_NOT_CHECKED, cause=_one_line(str(exc), 400)) from None
        except SandboxDied as exc:
            raise EnvironmentFailure(LEARNER_NOT_CHECKED, cause=N_("the check sandbox died: {error}").format(
                error=_one_line(str(exc), 300))) from None
        error = reply.get("error") if isinstance(reply, dict) else {"message": "no answer"}
        if error or "preflight ok" not in str(reply.get("stdout", "")):
            what = error.get("type", "") + ": " + error.get("message", "") if isinstance(error, dict) else str(error)
            raise EnvironmentFailure(LEARNER_NOT_CHECKED, cause=N_(
                "torch does not work in the sandbox ({error})").format(error=_one_line(what, 300)))
        return N_("the sandbox starts and torch works in it")
    finally:
        sandbox.close()


#: What ``course-grade --check`` says when the environment cannot check a notebook.
LEARNER_NOT_CHECKED = N_(
    "your notebook was NOT checked: this computer's grading environment does not work ({cause}). "
    "This is not a problem of your notebook. What to do: run `bash scripts/setup.sh` in the course folder "
    "(or ask whoever installed the course), then check again; if it still fails, send this message to your "
    "teacher.")
