"""Typical mistakes for lesson02_pooling, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

def _nd(squared: str) -> str:
    """gaussian_weights_nd with another (Q, K, d) tensor of squared scaled differences."""
    return f'''
def gaussian_weights_nd(queries, keys, widths):
    return torch.softmax(-({squared}).sum(dim=-1) / 2, dim=-1)
'''


MISTAKES = {
    "softmax_over_queries": {
        "replace": {"gaussian_weights": '''
def gaussian_weights(queries, keys, width=1.0):
    diffs = queries[:, None] - keys[None, :]
    return torch.softmax(-diffs**2 / (2 * width**2), dim=0)  # normalises each key's column
'''},
        "fails": ["test_gaussian_weights_public", "test_gaussian_weights"],
        "hint": "your weights equal a softmax over the queries (dim=0): normalise each query's row over the keys (the last axis)",
        "lesson": "2",
        "section": 4,
        "public": True,
        "may_fail": ["test_nadaraya_watson_public", "test_nadaraya_watson"],
    },
    "missing_factor_two": {
        "replace": {"gaussian_weights": '''
def gaussian_weights(queries, keys, width=1.0):
    diffs = queries[:, None] - keys[None, :]
    return torch.softmax(-diffs**2 / width**2, dim=-1)  # exp(-u^2), not exp(-u^2 / 2)
'''},
        "fails": ["test_gaussian_weights_public", "test_gaussian_weights"],
        "hint": "your weights equal a Gaussian kernel without the 1/2: the score is -(x - x_i)^2 / (2 h^2)",
        "lesson": "2",
        "section": 4,
        "public": True,
        "may_fail": ["test_nadaraya_watson"],
    },
    "exp_over_sum_underflows": {
        "replace": {"gaussian_weights": '''
def gaussian_weights(queries, keys, width=1.0):
    diffs = queries[:, None] - keys[None, :]
    scores = torch.exp(-diffs**2 / (2 * width**2))
    return scores / scores.sum(dim=-1, keepdim=True)  # 0 / 0 = NaN for a tiny width
'''},
        "fails": ["test_gaussian_weights"],
        "public": True,  # the public part of test_gaussian_weights tries a width of 0.01
    },
    "prediction_ignores_weights": {
        "replace": {"nadaraya_watson": '''
def nadaraya_watson(queries, keys, values, width=1.0):
    return values.mean(dim=0).expand(queries.shape[0], *values.shape[1:])  # average pooling
'''},
        "fails": ["test_nadaraya_watson"],
    },
    "epanechnikov_not_clamped": {
        "replace": {"kernels": '''
def boxcar_kernel(u):
    return (u.abs() <= 1).to(u.dtype)


def epanechnikov_kernel(u):
    return 0.75 * (1 - u**2)  # negative outside the window
'''},
        "fails": ["test_kernels_public", "test_kernels", "test_kernel_weights_public", "test_kernel_weights"],
        "hint": "your Epanechnikov kernel equals 3/4 (1 - u^2) without clamping: it must be 0 outside |u| <= 1",
        "lesson": "2",
        "section": 6,
        "public": True,
    },
    "no_empty_window_fallback": {
        "replace": {"kernel_weights": '''
def kernel_weights(queries, keys, kernel, width=1.0):
    scores = kernel((queries[:, None] - keys[None, :]) / width)
    return scores / scores.sum(dim=-1, keepdim=True)  # NaN where no key is in the window
'''},
        "fails": ["test_kernel_weights_public", "test_kernel_weights"],
        "hint": "your kernel weights equal scores divided by their sum even when no key is inside the window (0 / 0): give such a query the fallback the assignment describes",
        "lesson": "2",
        "section": 6,
        "public": True,
    },
    "kernel_weights_without_width": {
        "replace": {"kernel_weights": '''
def kernel_weights(queries, keys, kernel, width=1.0):
    diffs = queries[:, None] - keys[None, :]
    scores = kernel(diffs)  # forgot to divide by the width
    total = scores.sum(dim=-1, keepdim=True)
    empty = total == 0
    weights = scores / torch.where(empty, torch.ones_like(total), total)
    nearest = torch.nn.functional.one_hot(diffs.abs().argmin(dim=-1), keys.shape[0]).to(weights.dtype)
    return torch.where(empty, nearest, weights)
'''},
        "fails": ["test_kernel_weights"],
    },
    # Vector points: one width for every feature (the first), not one per feature.
    "nd_one_width_for_all": {
        "replace": {"gaussian_weights_nd": _nd("((queries[:, None, :] - keys[None, :, :]) / widths[0]) ** 2")},
        "fails": ["test_gaussian_weights_nd"],
        "hint": "your weights equal ones that divide every feature by the same width: divide each feature's "
                "difference by its own width before squaring",
        "lesson": "2",
        "section": 5,
        "public": True,
    },
    # Vector points: the width not squared.
    "nd_width_not_squared": {
        "replace": {"gaussian_weights_nd": _nd("(queries[:, None, :] - keys[None, :, :]) ** 2 / widths")},
        "fails": ["test_gaussian_weights_nd"],
        "hint": "your weights equal ones whose scores divide the squared difference by h instead of h^2: "
                "divide the difference by the width, then square",
        "lesson": "2",
        "section": 4,
        "public": True,
    },
    # Vector points: exp over its sum, which is 0 / 0 for tiny widths.
    "nd_exp_over_sum": {
        "replace": {"gaussian_weights_nd": '''
def gaussian_weights_nd(queries, keys, widths):
    scores = torch.exp(-(((queries[:, None, :] - keys[None, :, :]) / widths) ** 2).sum(dim=-1) / 2)
    return scores / scores.sum(dim=-1, keepdim=True)
'''},
        "fails": ["test_gaussian_weights_nd"],
        "public": True,
    },
    # The experiment: the width chosen by the training error (itself included) instead of leave-one-out.
    "experiment_width_by_training_error": {
        "replace": {"answers_experiment": '''
with torch.no_grad():
    train = {w: float(((reference_nadaraya_watson(x_train, x_train, y_train, width=w) - y_train) ** 2).mean())
             for w in EXP_WIDTHS}
    ANSWER_BEST_WIDTH = min(train, key=train.get)
    ANSWER_LOO_MSE = float(leave_one_out_mse(NadarayaWatsonRegression(init_width=ANSWER_BEST_WIDTH), x_train, y_train))
    ANSWER_TRAIN_MSE = train[0.05]
'''},
        "fails": ["test_experiment_width"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_BOXCAR_WEIGHT = 1 / 10  # every key, as if the window held them all
ANSWER_SMALL_WIDTH = "a"
ANSWER_LARGE_WIDTH = "b"
'''},
        "fails": ["test_answer_boxcar_weight", "test_answer_small_width", "test_answer_large_width"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "pooling.ipynb"))
