"""Typical mistakes for lesson03_scoring, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

import json
from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

_NOTEBOOK = json.loads((Path(__file__).parent / "scoring.ipynb").read_text("utf-8"))
_SOLUTIONS = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]).replace("    ### BEGIN SOLUTION\n", "").replace(
    "    ### END SOLUTION\n", "").replace("### BEGIN SOLUTION\n", "").replace("### END SOLUTION\n", "")
    for c in _NOTEBOOK["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution") and c["cell_type"] == "code"}
_ATTEND, _EXPERIMENT = _SOLUTIONS["attend"], _SOLUTIONS["experiment"]

MISTAKES = {
    "missing_sqrt": {
        "replace": {"dot_product_attention": '''
class DotProductAttention(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def forward(self, queries, keys, values, valid_lens=None):
        scores = torch.bmm(queries, keys.transpose(1, 2))  # forgot / sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)
'''},
        "fails": ["test_dot_product_public", "test_dot_product"],
        "hint": "your attention equals one whose scores are not divided by sqrt(d): divide q·k by the square root of the query size before the softmax",
        "lesson": "3",
        "section": 8,
        "public": True,
    },
    "softmax_wrong_axis": {
        "replace": {"masked_softmax": '''
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=1)
    batch, num_queries, num_keys = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(batch, num_queries)
    keep = torch.arange(num_keys)[None, None, :] < valid_lens[:, :, None]
    return torch.nan_to_num(torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=1), nan=0.0)
'''},
        "fails": ["test_masked_softmax_public", "test_masked_softmax"],
        "hint": "your weights equal a softmax taken over the queries (dim=1) instead of the keys: take it over the last axis, so each query's row sums to one",
        "lesson": "3",
        "section": 2,
        "public": True,
        "may_fail": ["test_dot_product_public", "test_dot_product", "test_additive_public", "test_additive"],
    },
    "mask_after_softmax": {
        "replace": {"masked_softmax": '''
def masked_softmax(scores, valid_lens=None):
    weights = torch.softmax(scores, dim=-1)
    if valid_lens is None:
        return weights
    batch, num_queries, num_keys = scores.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(batch, num_queries)
    keep = torch.arange(num_keys)[None, None, :] < valid_lens[:, :, None]
    return weights * keep  # zeroed after the softmax, not renormalised
'''},
        "fails": ["test_masked_softmax_public", "test_masked_softmax"],
        "hint": "your weights equal a softmax whose padded keys were zeroed after it: set masked scores to -inf before the softmax",
        "lesson": "3",
        "section": 3,
        "public": True,
        "may_fail": ["test_dot_product_public", "test_dot_product", "test_additive_public", "test_additive"],
    },
    "valid_lens_2d_ignored": {
        "replace": {"masked_softmax": '''
def masked_softmax(scores, valid_lens=None):
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    batch, num_queries, num_keys = scores.shape
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]  # only looks at the first query's length
    keep = torch.arange(num_keys)[None, None, :] < valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(~keep, -1e9), dim=-1)
'''},
        "fails": ["test_masked_softmax_public", "test_masked_softmax"],
        "hint": "your weights equal a mask that keeps one length per batch element when valid_lens has shape (B, Q): give each query its own length",
        "lesson": "3",
        "section": 2,
        "public": True,
        "may_fail": ["test_dot_product", "test_additive"],
    },
    "additive_without_tanh": {
        "replace": {"additive_attention": '''
class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout=0.0):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def forward(self, queries, keys, values, valid_lens=None):
        features = self.W_q(queries).unsqueeze(2) + self.W_k(keys).unsqueeze(1)
        scores = self.w_v(features).squeeze(-1)  # no tanh
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)
'''},
        "fails": ["test_additive"],
        "hint": "your scores equal w_v(W_q q + W_k k) without the tanh: apply tanh to the sum before w_v",
        "lesson": "3",
        "section": 5,
    },
    "additive_renamed_parameters": {
        "replace": {"additive_attention": '''
class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout=0.0):
        super().__init__()
        self.key_proj = nn.Linear(key_size, num_hiddens, bias=False)
        self.query_proj = nn.Linear(query_size, num_hiddens, bias=False)
        self.score = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.attention_weights = None

    def forward(self, queries, keys, values, valid_lens=None):
        features = self.query_proj(queries).unsqueeze(2) + self.key_proj(keys).unsqueeze(1)
        scores = self.score(torch.tanh(features)).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)
'''},
        "fails": ["test_additive"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_VARIANCE = 8  # sqrt(64), not the variance
ANSWER_SQRT = "a"
ANSWER_MASK = "c"
ANSWER_BUG = "a"
'''},
        "fails": ["test_answer_variance", "test_answer_sqrt", "test_answer_mask", "test_answer_bug"],
    },
    # section 4, the transfer task
    "attend_padding_mask_inverted": {
        "replace": {"attend": _ATTEND.replace("allowed & ~key_padding_mask[:, None, :]",
                                              "allowed & key_padding_mask[:, None, :]")},
        "fails": ["test_attend_public", "test_attend"],
        "hint": "your weights equal attention that keeps exactly the keys key_padding_mask marks True: in PyTorch's "
                "convention True means a padded key, to be masked out (negate it to get 'may attend')",
        "lesson": "5",
        "section": 5,
        "public": True,
    },
    "attend_causal_not_aligned": {
        "replace": {"attend": _ATTEND.replace("offset = num_keys - num_queries", "offset = 0")},
        "fails": ["test_attend_public", "test_attend"],
        "hint": "your weights equal a causal mask that puts query i at position i: when there are fewer queries than "
                "keys, the queries are the last Q positions, so query i may attend to keys j <= i + K - Q",
        "lesson": "9",
        "section": 4,
        "public": True,
    },
    "attend_nan_without_keys": {
        "replace": {"attend": _ATTEND.replace("torch.finfo(scores.dtype).min", "float('-inf')").replace(
            "    weights = weights.masked_fill(~allowed, 0.0)  # a row with no allowed key: all zeros\n", "")},
        "fails": ["test_attend"],
        "hint": "your weights are NaN for a query whose keys are all padded: a softmax over only -inf is 0/0; fill "
                "forbidden scores with a finite very negative number and set forbidden weights to 0 after the softmax",
        "lesson": "3",
        "section": 3,
        "public": True,
    },
    # section 5, the debugging task
    "debug_left_unfixed": {
        "replace": {"stable_masked_softmax": '''
def stable_masked_softmax(scores, valid_lens=None):
    weights = torch.exp(scores)  # the colleague's code, copied unchanged
    if valid_lens is not None:
        lens = valid_lens.reshape(len(valid_lens), -1)
        keep = torch.arange(scores.shape[-1])[None, None, :] < lens[:, :, None]
        weights = weights * keep
    return weights / weights.sum(dim=-1, keepdim=True)
'''},
        "fails": ["test_stable_softmax"],
        "hint": "your weights are NaN for large scores, as the colleague's are: exp overflows to inf above about 88 in "
                "float32; subtract each row's largest kept score before exp",
        "lesson": "9",
        "section": 2,
    },
    "debug_max_over_all_keys": {
        "replace": {"stable_masked_softmax": '''
def stable_masked_softmax(scores, valid_lens=None):
    shifted = scores - scores.amax(dim=-1, keepdim=True)  # the max over every key, padded ones too
    weights = torch.exp(shifted)
    if valid_lens is not None:
        lens = valid_lens.reshape(len(valid_lens), -1)
        keep = torch.arange(scores.shape[-1])[None, None, :] < lens[:, :, None]
        weights = weights * keep
    return weights / weights.sum(dim=-1, keepdim=True)
'''},
        "fails": ["test_stable_softmax"],
        "hint": "your weights are NaN when a padded key holds the row's largest score: you subtract the maximum over "
                "every key, so the kept ones all underflow to 0; subtract the largest kept score instead",
        "lesson": "9",
        "section": 2,
    },
    # section 6, the experiment
    "experiment_scaled_by_d": {
        "replace": {"experiment": _EXPERIMENT.replace("_raw / math.sqrt(_d)", "_raw / _d")},
        "fails": ["test_experiment_peak"],
    },
    "experiment_swapped": {
        "replace": {"experiment": _EXPERIMENT + "\nANSWER_PEAK_RAW, ANSWER_PEAK_SCALED = ANSWER_PEAK_SCALED, ANSWER_PEAK_RAW\n"},
        "fails": ["test_experiment_peak"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "scoring.ipynb"))
