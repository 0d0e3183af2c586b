"""Typical mistakes for lesson12_project, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.

The project tests train a configuration on the grader's side (``course_lib.project.run``,
memoised per configuration in the grading process): the mistakes of the loss and the schedule
keep the solution's configuration, so they cost no training beyond the solution's own.
"""

import json
from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

NOTEBOOK = Path(__file__).parent / "project.ipynb"

_LOSS = '''
def label_smoothed_loss(logits, targets, pad_id, smoothing):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    per_token = (1 - smoothing) * nll + smoothing * uniform
    real = targets != pad_id
    return per_token[real].sum() / real.sum()
'''

_SCHEDULE = '''
def lr_schedule(step, total_steps, warmup, peak_lr):
    if step <= warmup:
        return peak_lr * step / warmup
    t = (step - warmup) / (total_steps - warmup)
    return peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))
'''


def _solution_config() -> dict:
    cells = json.loads(NOTEBOOK.read_text("utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "config")
    body = source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
    return json.loads(body.strip().removeprefix("return").strip())


def _config(config: dict) -> str:
    return f"def project_config():\n    return {json.dumps(config)}\n"


_PROJECT = ["test_project_baseline", "test_project_better", "test_project_reference"]

MISTAKES = {
    "loss_counts_padding": {
        "replace": {"loss": _LOSS.replace("return per_token[real].sum() / real.sum()", "return per_token.mean()")},
        "fails": ["test_loss_public", "test_loss"],
        "hint": "your loss equals one averaged over every position, padding included: average only over the "
                "positions whose target is not pad_id",
        "lesson": "12",
        "section": 4,
        "public": True,
    },
    "loss_uniform_summed": {
        "replace": {"loss": _LOSS.replace("uniform = -log_p.mean(dim=-1)", "uniform = -log_p.sum(dim=-1)")},
        "fails": ["test_loss"],
        "hint": "your loss equals one whose smoothing term sums -log p over the vocabulary: the smoothing mass is "
                "spread uniformly, so take the mean over the V entries",
        "lesson": "12",
        "section": 4,
        "public": True,
    },
    "loss_smoothing_ignored": {
        "replace": {"loss": _LOSS.replace("per_token = (1 - smoothing) * nll + smoothing * uniform", "per_token = nll")},
        "fails": ["test_loss"],
        "hint": "your loss equals the cross-entropy without smoothing: mix (1 - smoothing) times the reference's "
                "-log p with smoothing times the mean of -log p over the vocabulary",
        "lesson": "12",
        "section": 4,
        "public": True,
    },
    "schedule_warmup_from_zero": {
        "replace": {"schedule": _SCHEDULE.replace("return peak_lr * step / warmup", "return peak_lr * (step - 1) / warmup")},
        "fails": ["test_schedule"],
        "hint": "your schedule equals a warm-up that starts from 0 at step 1: steps count from 1, and step s of "
                "the warm-up has peak_lr * s / warmup",
        "lesson": "7b",
        "section": 1,
        "public": True,
    },
    "schedule_decays_to_zero": {
        "replace": {"schedule": _SCHEDULE.replace("(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))",
                                                  "0.5 * (1 + math.cos(math.pi * t))")},
        "fails": ["test_schedule"],
        "hint": "your schedule equals a cosine that decays to 0: it must end at peak_lr / 10, "
                "peak_lr * (0.1 + 0.9 * half the cosine)",
        "lesson": "7b",
        "section": 1,
        "public": True,
    },
    "config_over_the_cap": {
        # a wider and deeper model: 4 layers of d_model 256 are far over PARAM_CAP
        "replace": {"config": _config(dict(_solution_config(), d_model=256, d_ff=1024, num_layers=4))},
        "fails": ["test_project_config", *_PROJECT, "test_experiment"],
        "public": True,
    },
    "config_asks_for_more_steps": {
        # training longer than the budget is not a choice: an unknown key is refused
        "replace": {"config": _config(dict(_solution_config(), steps=5000))},
        "fails": ["test_project_config", *_PROJECT, "test_experiment"],
        "public": True,
    },
    "config_is_the_baseline": {
        # the lesson's recipe unchanged: the baseline's points, not the better or reference ones (and the
        # reported dev BLEU of "my configuration" is no longer the configuration's)
        "replace": {"config": "def project_config():\n    return dict(BASELINE)\n"},
        "fails": ["test_project_better", "test_project_reference", "test_experiment"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, None) in place of each graded
# function: no test may give one a point.
MISTAKES.update(trivial_mistakes(NOTEBOOK))
# project_config takes no argument and returns a dict: the "_out" variants blank tensors and numbers only,
# so they return the solution's dict unchanged and equal the solution.
for _kind in ("zeros_out", "constant_out"):
    del MISTAKES[f"trivial_project_config_{_kind}"]
