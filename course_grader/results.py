"""What grading records: the result types of one test, one notebook and one submission.

Plain dataclasses with no dependency on torch or the sandbox, so that rendering feedback,
writing gradebooks and reading ``grades.json`` back never load the grading engine
(``import course_grader.feedback`` imports no torch; a test checks it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from course_grader.i18n import N_

__all__ = ["Status", "TestOutcome", "WrittenAnswer", "NotebookResult", "SubmissionResult", "worst", "MANUAL",
           "NO_ANSWER"]


@dataclass
class TestOutcome:
    """The result of one test cell."""

    grade_id: str
    column: str
    points: float
    max_points: float
    passed: bool
    message: str = ""
    details: str = ""
    hidden: bool = False
    skipped: bool = False
    #: what the test checks, for the learner (one line), and the lesson section it practises
    #: (lesson "" and section 0: not said); from the source notebook's test cell
    #: (course_grader.notebook.cell_test_info)
    description: str = ""
    lesson: str = ""
    section: int = 0
    #: the typical mistake (a key of the assignment's mistakes.py) whose outputs the learner's
    #: matched on this test's inputs, its hint for the learner and the lesson section that
    #: covers it (course_grader.diagnose); "" when none
    mistake: str = ""
    hint: str = ""
    hint_lesson: str = ""
    hint_section: int = 0


#: The status of a written answer (course_grader.notebook.WrittenCell) until the teacher grades it
#: by hand in Formgrader: it has no score yet, and it is never a 0.
MANUAL = N_("needs manual grade")
#: The status of a written answer left blank (missing, empty, or the released text): 0 points,
#: as nbgrader's autograde gives an unchanged answer cell; the teacher may still give a score.
NO_ANSWER = N_("no answer")


@dataclass
class WrittenAnswer:
    """A written-analysis cell of the learner's notebook (nbgrader's "manually graded answer").

    course-grade never scores an answer: ``points`` stays None ("no score", not 0) and
    ``status`` says it waits for the teacher (:data:`MANUAL`), who grades it in Formgrader
    against the mark scheme of the instructor's source. A blank answer (``answered`` False)
    is worth 0 (:data:`NO_ANSWER`), as in nbgrader's autograde. ``answer`` is the learner's text as found in the
    notebook, cut to :data:`course_grader.sinks.MAX_ANSWER` characters with every control
    character shown as an escape (:func:`course_grader.sinks.answer_text`); each sink escapes
    it again for itself.
    """

    grade_id: str
    column: str
    max_points: float
    answer: str = ""
    #: False when the cell is missing, empty, or still the released text ("YOUR ANSWER HERE")
    answered: bool = False
    points: float | None = None
    status: str = MANUAL


@dataclass
class NotebookResult:
    """Results for one notebook of a submission."""

    notebook: str
    status: Status
    tests: list[TestOutcome] = field(default_factory=list)
    cells: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration: float = 0.0
    #: which memory bound applied to the learner's processes (memory cgroup or RLIMIT_AS)
    memory_bound: str = ""
    #: which system-call filter applied (course_grader.policy)
    seccomp: str = ""
    #: the language of the learner's notebook, for the learner-facing feedback
    #: (course_grader.i18n.notebook_language: "en" unless its metadata names one we know)
    language: str = "en"
    #: the variants the tests used (course_grader.variants: assignment, digest, values)
    variants: list[dict] = field(default_factory=list)
    #: the written answers, graded by hand (:class:`WrittenAnswer`); not in ``tests``
    written: list[WrittenAnswer] = field(default_factory=list)


@dataclass
class SubmissionResult:
    """Everything recorded for one learner and one assignment."""

    student: str
    assignment: str
    status: Status
    total: float
    max_total: float
    notebooks: list[NotebookResult] = field(default_factory=list)
    seed: str = "random"
    duration: float = 0.0
    #: the learner's variant (course_grader.variants.Variant.record: assignment, digest, values); {} when
    #: the assignment has none
    variant: dict = field(default_factory=dict)

    @property
    def language(self) -> str:
        """The language of the feedback: the first notebook's that is not English, else English."""
        from course_grader.i18n import DEFAULT, normalise_language
        for nb in self.notebooks:
            lang = normalise_language(str(nb.language).replace("_", "-"))
            if lang is not None and lang != DEFAULT:
                return lang
        return DEFAULT

    @property
    def scores(self) -> dict[str, float]:
        """Column -> points of the auto-graded tests (written answers have no score here)."""
        return {t.column: t.points for nb in self.notebooks for t in nb.tests}

    @property
    def written(self) -> list[WrittenAnswer]:
        return [w for nb in self.notebooks for w in nb.written]

    @property
    def pending_manual(self) -> float:
        """The points of written answers still to be graded by the teacher: while it is not 0,
        ``total`` is provisional (the auto-graded points only), and ``max_total`` includes them."""
        return round(sum(w.max_points for w in self.written if w.points is None), 4)

    def to_dict(self) -> dict:
        return {**asdict(self), "pending_manual": self.pending_manual}

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        nbs = []
        for nb in data.get("notebooks", []):
            tests = [TestOutcome(**t) for t in nb.get("tests", [])]
            written = [WrittenAnswer(**w) for w in nb.get("written", [])]
            nbs.append(NotebookResult(**{**nb, "tests": tests, "written": written, "status": Status(nb["status"])}))
        data = {k: v for k, v in data.items() if k != "pending_manual"}
        return cls(**{**data, "notebooks": nbs, "status": Status(data["status"])})


class Status(str, Enum):
    """The status of a graded notebook and of a submission (the worst of its notebooks).

    A ``str`` whose value is what grades.csv, grades.json and the feedback show."""

    OK = "ok"
    TIMEOUT = N_("timeout")            # the learner's code was stopped (the sandbox restarted once)
    SANDBOX_DIED = N_("sandbox died")
    INVALID = N_("invalid notebook")   # not JSON, truncated, nested too deeply, ...
    REFUSED = N_("refused")            # a link, a FIFO, a device, too big
    MISSING = N_("missing")
    GRADER_ERROR = N_("grader error")  # a bug of ours: the row is still written, with zeros

    def __str__(self) -> str:
        return str(self.value)

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Status.OK: 0, Status.TIMEOUT: 2, Status.SANDBOX_DIED: 2, Status.INVALID: 3, Status.REFUSED: 3,
         Status.MISSING: 3, Status.GRADER_ERROR: 4}


def worst(statuses: "list[Status | str]") -> Status:
    """The status of a submission: the worst of its notebooks' (ties: the first)."""
    out = Status.OK
    for s in statuses:
        s = Status(s)
        if s.rank > out.rank:
            out = s
    return out
