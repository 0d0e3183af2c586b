"""Typical mistakes for lesson05_multihead, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import solution_editor, trivial_mistakes

_SPLIT_MERGE = '''
def split_heads(x, num_heads):
    batch, steps, embed = x.shape
    x = x.reshape(batch, steps, num_heads, embed // num_heads)
    return x.transpose(1, 2)


def merge_heads(x):
    batch, heads, steps, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, steps, heads * head_dim)
'''

_INIT = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.attention_weights = None
'''


_fused = _edit = solution_editor(Path(__file__).parent / "multihead.ipynb")


def _fused_edit(*changes: tuple[str, str]) -> dict[str, str]:
    return _fused("fused_attention", *changes)


def _mha(body: str) -> str:
    """A MultiHeadAttention whose forward is ``body`` (the usual __init__)."""
    return _INIT + "\n    def forward(self, query, key, value, key_padding_mask=None):\n" + body


# the public check compares one example with torch.nn.MultiheadAttention: it fails too
_MHA_FAILS = ["test_mha_public", "test_mha", "test_mha_padding"]

MISTAKES = {
    "missing_sqrt": {
        "replace": {"multihead_attention": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1)  # forgot / sqrt(D)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(self.attention_weights @ v))
''')},
        "fails": _MHA_FAILS,
        "hint": "your layer equals one whose scores are not divided by sqrt(D): scale each head's scores by the head size",
        "lesson": "5",
        "section": 1,
        "public": True,
    },
    "scrambled_head_reshape": {
        "replace": {"split_merge": '''
def split_heads(x, num_heads):
    batch, steps, embed = x.shape
    return x.reshape(batch, num_heads, steps, embed // num_heads)  # right shape, wrong content


def merge_heads(x):
    batch, heads, steps, head_dim = x.shape
    return x.reshape(batch, steps, heads * head_dim)  # the matching wrong inverse
'''},
        "fails": ["test_split_merge_public", "test_split_merge"] + _MHA_FAILS,
        "hint": "your heads equal a reshape straight to (B, H, T, D), which mixes tokens and heads: reshape to (B, T, H, D), then transpose",
        "lesson": "5",
        "section": 3,
        "public": True,
    },
    "merge_without_transpose": {
        "replace": {"split_merge": '''
def split_heads(x, num_heads):
    batch, steps, embed = x.shape
    return x.reshape(batch, steps, num_heads, embed // num_heads).transpose(1, 2)


def merge_heads(x):
    batch, heads, steps, head_dim = x.shape
    return x.reshape(batch, steps, heads * head_dim)  # forgot to move H back behind T
'''},
        "fails": ["test_split_merge_public", "test_split_merge"] + _MHA_FAILS,
        "public": True,
    },
    "forgot_output_projection": {
        "replace": {"multihead_attention": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return merge_heads(self.attention_weights @ v)  # no W_o
''')},
        "fails": _MHA_FAILS,
        "hint": "your output equals the concatenated heads without W_o: apply the output projection after merging the heads",
        "lesson": "5",
        "section": 1,
        "public": True,
    },
    "scaled_by_sqrt_embed_dim": {
        "replace": {"multihead_attention": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])  # sqrt(E), not sqrt(D)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(self.attention_weights @ v))
''')},
        "fails": _MHA_FAILS,
        "hint": "your layer equals one whose scores are divided by sqrt(E): divide by the square root of the head size D = E / H",
        "lesson": "5",
        "section": 1,
        "public": True,
    },
    "mask_convention_inverted": {
        "replace": {"multihead_attention": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if key_padding_mask is not None:  # read True as "may attend" (SDPA's convention)
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(self.attention_weights @ v))
''')},
        "fails": ["test_mha_public", "test_mha_padding"],
        "hint": "your layer equals one that reads True in key_padding_mask as \"may attend\": in PyTorch's convention True means padding, which gets no weight",
        "lesson": "5",
        "section": 5,
        "public": True,
    },
    "mask_after_softmax": {
        "replace": {"multihead_attention": _mha('''
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), dim=-1)
        if key_padding_mask is not None:  # zeroed after the softmax: rows no longer sum to one
            weights = weights.masked_fill(key_padding_mask[:, None, None, :], 0.0)
        self.attention_weights = weights
        return self.out_proj(merge_heads(self.attention_weights @ v))
''')},
        "fails": ["test_mha_public", "test_mha_padding"],
        "public": True,
    },
    "renamed_parameters": {
        "replace": {"multihead_attention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.W_k = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.W_v = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.W_o = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.attention_weights = None

    def forward(self, query, key, value, key_padding_mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        self.attention_weights = torch.softmax(scores, dim=-1)
        return self.W_o(merge_heads(self.attention_weights @ v))
'''},
        "fails": _MHA_FAILS,
        "public": True,
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_PARAMS = 8 * 4 * 512 * 512  # as if every head had its own E x E matrices
ANSWER_HEAD_SIZE = 512
ANSWER_COMBINE = "a"
'''},
        "fails": ["test_answer_params", "test_answer_head_size", "test_answer_combine"],
    },
    # section 3, the transfer task
    "fused_chunks_in_wrong_order": {
        # takes the first third of the fused projection as the keys: PyTorch's order is q, k, v
        "replace": _fused_edit(("q, k, v = self.qkv_proj(x).chunk(3, dim=-1)", "k, q, v = self.qkv_proj(x).chunk(3, dim=-1)")),
        "fails": ["test_fused"],
        "hint": "your fused layer equals one that reads the keys from the first third of qkv_proj: the rows are "
                "queries, then keys, then values (PyTorch's in_proj_weight order)",
        "lesson": "5",
        "section": 5,
        "public": True,
    },
    "fused_load_forgets_out_proj": {
        # load_unfused copies the three input projections but not the output projection
        "replace": _fused_edit(("            self.out_proj.load_state_dict(mha.out_proj.state_dict())\n", "")),
        "fails": ["test_fused"],
        # no hint: the output projection left at its random initialisation gives outputs no replay can match
    },
    # section 4, the debugging task
    "debug_left_unfixed": {
        # the colleague's repeat: sequence b's mask lands on rows h * B + b, the heads sit at rows b * H + h
        "replace": _edit("heads_attention", (
            "key_padding_mask.repeat_interleave(num_heads, dim=0)", "key_padding_mask.repeat(num_heads, 1)")),
        "fails": ["test_heads_attention"],
        "hint": "your output equals the colleague's: repeat(num_heads, 1) gives head h of sequence b the mask of another "
                "sequence; the heads of sequence b are rows b * H ... b * H + H - 1, so repeat each mask with "
                "repeat_interleave(num_heads, dim=0)",
        "lesson": "5",
        "section": 3,
    },
    "debug_mask_on_queries": {
        # the mask broadcast over the keys' axis: it hides padded queries (rows of -inf: NaN) instead of keys
        "replace": _edit("heads_attention", ("scores.masked_fill(mask[:, None, :]", "scores.masked_fill(mask[:, :, None]")),
        "fails": ["test_heads_attention"],
        "public": True,
    },
    "debug_wrong_cause": {
        "replace": {"answer_heads_bug": 'ANSWER_HEADS_BUG = "a"\n'},
        "fails": ["test_answer_heads_bug"],
    },
    # section 5, the experiment
    "experiment_rank_of_all_heads": {
        # head 0's rank taken from the whole (T, E) queries and keys: a single head's, T
        "replace": _edit("experiment", (
            "split_heads(_q, _H)[0, 0] @ split_heads(_k, _H)[0, 0].T", "_q[0] @ _k[0].T")),
        "fails": ["test_experiment_rank"],
    },
    "experiment_swapped": {
        "replace": _edit("experiment", (
            "del _x, _wq, _wk, _q, _k, _scores_head",
            "del _x, _wq, _wk, _q, _k, _scores_head\nANSWER_RANK_HEAD, ANSWER_RANK_ONE_HEAD = ANSWER_RANK_ONE_HEAD, ANSWER_RANK_HEAD")),
        "fails": ["test_experiment_rank"],
    },
}

# The fused module calls the learner's split_heads and merge_heads, and its hidden test builds the learner's
# MultiHeadAttention: a mistake in those may fail it too; the experiment calls split_heads.
for _m in MISTAKES.values():
    if set(_m["replace"]) & {"split_merge", "multihead_attention"}:
        _m["may_fail"] = sorted(set(_m.get("may_fail", [])) | {"test_fused"})
    if "split_merge" in _m["replace"]:
        _m["may_fail"] = sorted(set(_m["may_fail"]) | {"test_experiment_rank"})

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "multihead.ipynb"))
