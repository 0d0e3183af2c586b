"""Typical mistakes for lesson06_positional, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes


def _table(sin_cols: str, cos_cols: str, exponent: str = "torch.arange(0, embed_dim, 2, dtype=torch.float64)") -> str:
    return f'''
def sinusoidal_encoding(num_positions, embed_dim):
    positions = torch.arange(num_positions, dtype=torch.float64)[:, None]
    freqs = 10000.0 ** (-{exponent} / embed_dim)
    angles = positions * freqs
    table = torch.zeros(num_positions, embed_dim, dtype=torch.float64)
    table[:, 0::2] = {sin_cols}
    table[:, 1::2] = {cos_cols}
    return table.to(torch.float32)
'''


def _module(init: str, forward: str = "return self.dropout(X + self.P[:, : X.shape[1]])") -> str:
    return f'''
class PositionalEncoding(nn.Module):
    def __init__(self, embed_dim, dropout=0.0, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        {init}

    def forward(self, X):
        {forward}
'''


_BUFFER = 'self.register_buffer("P", sinusoidal_encoding(max_len, embed_dim)[None])'
_MODULE_TESTS = ["test_module_public", "test_module"]
_RELATIVE = '''
class RelativePositionBias(nn.Module):
    def __init__(self, num_heads, max_distance):
        super().__init__()
        self.num_heads, self.max_distance = num_heads, max_distance
        self.bias_table = nn.Parameter(torch.zeros(num_heads, 2 * max_distance + 1))

    def forward(self, num_queries, num_keys):
        offsets = torch.arange(num_keys)[None, :] - torch.arange(num_queries)[:, None]
        columns = offsets.clamp(-self.max_distance, self.max_distance) + self.max_distance
        return self.bias_table[:, columns]


def attention_with_bias(q, k, v, bias):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias
    return torch.softmax(scores, dim=-1) @ v
'''

_EXPERIMENT = '''
exp_table = sinusoidal_encoding(512, VARIANT["exp_E"]).double()
k = VARIANT["exp_k"]
dots = (exp_table[:-k] * exp_table[k:]).sum(dim=-1)
ANSWER_DOT_SPREAD = float(dots.max() - dots.min())
ANSWER_DOT_K = float(exp_table[0] @ exp_table[k])
from_zero = exp_table @ exp_table[0]
ANSWER_FIRST_DIP = int((from_zero < from_zero[0] / 2).nonzero()[0])
'''


MISTAKES = {
    "sin_cos_swapped": {
        "replace": {"sinusoidal_encoding": _table("torch.cos(angles)[:, : (embed_dim + 1) // 2]",
                                                  "torch.sin(angles[:, : embed_dim // 2])")},
        "fails": ["test_encoding_public", "test_encoding"],
        "hint": "your table equals one with sine and cosine swapped: even columns take the sine, odd columns the cosine",
        "lesson": "6",
        "section": 4,
        "public": True,
        "may_fail": _MODULE_TESTS + ["test_experiment"],
    },
    "exponent_i_over_E": {
        # frequency 1 / 10000^(i/E) with i the pair index: half the exponent it should be
        "replace": {"sinusoidal_encoding": _table("torch.sin(angles)", "torch.cos(angles[:, : embed_dim // 2])",
                                                  exponent="torch.arange((embed_dim + 1) // 2, dtype=torch.float64)")},
        "fails": ["test_encoding_public", "test_encoding"],
        "hint": "your table equals one whose frequencies use i / E instead of 2i / E: the pair index i gives the exponent 2i / E",
        "lesson": "6",
        "section": 4,
        "public": True,
        "may_fail": ["test_experiment", "test_module"],
    },
    "odd_embed_dim_forgotten": {
        "replace": {"sinusoidal_encoding": _table("torch.sin(angles)", "torch.cos(angles)")},
        "fails": ["test_encoding"],
        "may_fail": ["test_experiment", "test_module"],
    },
    "table_not_a_buffer": {
        "replace": {"positional_encoding": _module("self.P = sinusoidal_encoding(max_len, embed_dim)[None]")},
        "fails": ["test_module_public", "test_module_buffer"],
        "hint": "your module keeps the table as a plain attribute: register it with register_buffer so it moves with .to() and is saved",
        "lesson": "6",
        "section": 7,
        "public": True,
    },
    "table_as_parameter": {
        "replace": {"positional_encoding": _module(
            "self.P = nn.Parameter(sinusoidal_encoding(max_len, embed_dim)[None], requires_grad=False)")},
        "fails": ["test_module_public", "test_module_buffer"],
        "hint": "your module makes the table an nn.Parameter, so it would be trained: register it as a buffer",
        "lesson": "6",
        "section": 7,
        "public": True,
    },
    "embeddings_rescaled_in_module": {
        "replace": {"positional_encoding": _module(
            _BUFFER, "return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, : X.shape[1]])")},
        "fails": ["test_module"],
    },
    "dropout_forgotten": {
        "replace": {"positional_encoding": _module(_BUFFER, "return X + self.P[:, : X.shape[1]]")},
        "fails": ["test_module"],
    },
    "shift_rotation_transposed": {
        "replace": {"shift_matrix": '''
def shift_matrix(shift, embed_dim):
    matrix = torch.zeros(embed_dim, embed_dim, dtype=torch.float64)
    for i in range(embed_dim // 2):
        angle = shift / 10000.0 ** (2 * i / embed_dim)
        c, s = math.cos(angle), math.sin(angle)
        matrix[2 * i, 2 * i], matrix[2 * i, 2 * i + 1] = c, -s  # the rotation the other way
        matrix[2 * i + 1, 2 * i], matrix[2 * i + 1, 2 * i + 1] = s, c
    return matrix
'''},
        "fails": ["test_shift_public", "test_shift"],
        "hint": "your shift matrix equals the rotation the other way: the block for frequency w is [[cos, sin], [-sin, cos]] of k w",
        "lesson": "6",
        "section": 5,
        "public": True,
    },
    "relative_offset_reversed": {
        # i - j instead of j - i: the bias of a key before the query read from the "after" side
        "replace": {"relative_bias": _RELATIVE.replace(
            "torch.arange(num_keys)[None, :] - torch.arange(num_queries)[:, None]",
            "torch.arange(num_queries)[:, None] - torch.arange(num_keys)[None, :]")},
        "fails": ["test_relative_bias_public", "test_relative_bias"],
        "hint": "your bias equals one indexed by the offset i - j: column c holds the offset j - i = c - M (a key "
                "after the query has a positive offset)",
        "lesson": "6",
        "section": 5,
        "public": True,
    },
    "relative_bias_after_softmax": {
        "replace": {"relative_bias": _RELATIVE.replace(
            "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias\n    return torch.softmax(scores, dim=-1) @ v",
            "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n    return (torch.softmax(scores, dim=-1) + bias) @ v")},
        "fails": ["test_relative_bias_public", "test_relative_bias"],
        "hint": "your attention equals one that adds the bias to the weights after the softmax: add it to the "
                "scores before the softmax",
        "lesson": "6",
        "section": 5,
        "public": True,
    },
    "relative_bias_scaled_too": {
        "replace": {"relative_bias": _RELATIVE.replace(
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias",
            "scores = (q @ k.transpose(-2, -1) + bias) / math.sqrt(q.shape[-1])")},
        "fails": ["test_relative_bias_public", "test_relative_bias"],
        "hint": "your scores equal (q k^T + bias) / sqrt(D): divide only q k^T by sqrt(D), then add the bias",
        "lesson": "6",
        "section": 5,
        "public": True,
    },
    "relative_not_clipped": {
        # offsets beyond M wrap around the table instead of taking the bias of +-M
        "replace": {"relative_bias": _RELATIVE.replace(
            "offsets.clamp(-self.max_distance, self.max_distance) + self.max_distance",
            "(offsets + self.max_distance) % (2 * self.max_distance + 1)")},
        "fails": ["test_relative_bias_public", "test_relative_bias"],
        "public": True,
    },
    "experiment_dip_off_by_one": {
        # the last offset still above half, not the first one below it
        "replace": {"experiment": _EXPERIMENT.replace("int((from_zero < from_zero[0] / 2).nonzero()[0])",
                                                      "int((from_zero < from_zero[0] / 2).nonzero()[0]) - 1")},
        "fails": ["test_experiment"],
    },
    "experiment_dot_of_unit_vectors": {
        # cosine similarity instead of the dot product
        "replace": {"experiment": _EXPERIMENT.replace("ANSWER_DOT_K = float(exp_table[0] @ exp_table[k])",
                                                      "ANSWER_DOT_K = float(exp_table[0] @ exp_table[k]) / float(exp_table[0] @ exp_table[0])")},
        "fails": ["test_experiment"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_SIN_COS = "b"
ANSWER_PATH_LENGTH = "d"
ANSWER_ONES = VARIANT["q_E"]  # every entry counted
'''},
        "fails": ["test_answer_sin_cos", "test_answer_path_length", "test_answer_ones"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "positional.ipynb"))
