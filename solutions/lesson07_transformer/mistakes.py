"""Typical mistakes for lesson07_transformer, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

_ENCODER_INIT = '''
class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
        self.addnorm2 = AddNorm(d_model, dropout)
'''

_DECODER_INIT = '''
class TransformerDecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        super().__init__()
        self.self_attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.cross_attention = nn.MultiheadAttention(d_model, num_heads, dropout=dropout, batch_first=True)
        self.addnorm2 = AddNorm(d_model, dropout)
        self.ffn = PositionWiseFFN(d_model, d_ff, dropout)
        self.addnorm3 = AddNorm(d_model, dropout)
'''

_ADDNORM_INIT = '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(d_model)
'''

_PROJECT_MEMORY = '''
def project_memory(weights, num_heads, memory):
    B, S, E = memory.shape
    H = num_heads
    D = E // H
    _, w_k, w_v = weights["in_proj_weight"].chunk(3)
    _, b_k, b_v = weights["in_proj_bias"].chunk(3)
    K = nn.functional.linear(memory, w_k, b_k).reshape(B, S, H, D).transpose(1, 2)
    V = nn.functional.linear(memory, w_v, b_v).reshape(B, S, H, D).transpose(1, 2)
    return K, V
'''

_STEP = '''
def cross_attention_step(weights, x, K, V, memory_key_padding_mask=None):
    B, L, E = x.shape
    H, D = K.shape[1], K.shape[3]
    w_q, b_q = weights["in_proj_weight"][:E], weights["in_proj_bias"][:E]
    q = nn.functional.linear(x, w_q, b_q).reshape(B, L, H, D).transpose(1, 2)
    scores = q @ K.transpose(-2, -1) / math.sqrt(D)
    if memory_key_padding_mask is not None:
        scores = scores.masked_fill(memory_key_padding_mask[:, None, None, :], float("-inf"))
    y = torch.softmax(scores, dim=-1) @ V
    return nn.functional.linear(y.transpose(1, 2).reshape(B, L, E), weights["out_proj.weight"], weights["out_proj.bias"])
'''

_EXPERIMENT = '''
from course_lib.transformer import TransformerEncoderBlock as CourseEncoderBlock


def gradient_ratio(norm_first):
    n, e, h, seed = VARIANT["exp_layers"], VARIANT["exp_E"], VARIANT["exp_H"], VARIANT["exp_seed"]
    torch.manual_seed(seed)
    blocks = [CourseEncoderBlock(e, h, 4 * e, dropout=0.0, norm_first=norm_first) for _ in range(n)]
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(8, 10, e, generator=g)
    target = torch.randn(8, 10, e, generator=g)
    inputs, stream = [], X.requires_grad_(True)
    for block in blocks:
        stream.retain_grad()
        inputs.append(stream)
        stream = block(stream)
    (stream * target).sum().backward()
    return float(inputs[0].grad.norm() / inputs[-1].grad.norm())


ANSWER_GRAD_POST = gradient_ratio(False)
ANSWER_GRAD_PRE = gradient_ratio(True)
'''


MISTAKES = {
    "causal_mask_without_diagonal": {
        # a position may not even look at itself: the first query has no key at all (NaN)
        "replace": {"causal_mask": '''
def causal_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=-1)
'''},
        "fails": ["test_causal_mask_public", "test_causal_mask", "test_decoder_block"],
        "hint": "your mask equals one that also hides each position from itself: a position may attend to itself and the past",
        "lesson": "7a",
        "section": 4,
        "public": True,
        "may_fail": ["test_decoder_block_public"],
    },
    "causal_mask_one_future_token": {
        "replace": {"causal_mask": '''
def causal_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)
'''},
        "fails": ["test_causal_mask_public", "test_causal_mask", "test_decoder_block_public", "test_decoder_block"],
        "public": True,
    },
    "norm_before_residual_add": {
        "replace": {"addnorm": _ADDNORM_INIT + '''
    def forward(self, X, Y):
        return X + self.norm(self.dropout(Y))  # normalizes the sub-layer output only
'''},
        "fails": ["test_addnorm_public", "test_addnorm", "test_encoder_block", "test_decoder_block"],
        "hint": "your add & norm equals X + LayerNorm(Y): normalise the sum, LayerNorm(X + Y)",
        "lesson": "7a",
        "section": 2,
        "public": True,
        "may_fail": ["test_encoder_block_public", "test_decoder_block_public"],
    },
    "missing_residual": {
        "replace": {"addnorm": _ADDNORM_INIT + '''
    def forward(self, X, Y):
        return self.norm(self.dropout(Y))  # forgot to add X
'''},
        "fails": ["test_addnorm_public", "test_addnorm", "test_encoder_block", "test_decoder_block"],
        "hint": "your add & norm equals LayerNorm(Y) without the residual: add the sub-layer's input X before normalising",
        "lesson": "7a",
        "section": 2,
        "public": True,
        "may_fail": ["test_encoder_block_public", "test_decoder_block_public"],
    },
    "ffn_relu_on_output": {
        "replace": {"ffn": '''
class PositionWiseFFN(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.dense1 = nn.Linear(d_model, d_ff)
        self.dense2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return torch.relu(self.dense2(self.dropout(self.dense1(X))))  # ReLU after the wrong layer
'''},
        "fails": ["test_ffn_public", "test_ffn", "test_encoder_block", "test_decoder_block"],
        "hint": "your feed-forward network equals one with the ReLU after the second layer: apply it between dense1 and dense2",
        "lesson": "7a",
        "section": 1,
        "public": True,
        "may_fail": ["test_encoder_block_public", "test_decoder_block_public"],
    },
    "encoder_ignores_padding": {
        "replace": {"encoder_block": _ENCODER_INIT + '''
    def forward(self, X, key_padding_mask=None):
        Y, _ = self.attention(X, X, X, need_weights=False)  # padding mask not passed on
        X = self.addnorm1(X, Y)
        return self.addnorm2(X, self.ffn(X))
'''},
        "fails": ["test_encoder_block"],
        "hint": "your encoder block equals one that does not pass key_padding_mask to its self-attention: padded "
                "positions change the real ones",
        "lesson": "7a",
        "section": 3,
        "public": True,
    },
    "decoder_without_causal_mask": {
        "replace": {"decoder_block": _DECODER_INIT + '''
    def forward(self, X, memory, memory_key_padding_mask=None):
        Y, _ = self.self_attention(X, X, X, need_weights=False)  # sees the future
        X = self.addnorm1(X, Y)
        Y, _ = self.cross_attention(X, memory, memory, key_padding_mask=memory_key_padding_mask,
                                    need_weights=False)
        X = self.addnorm2(X, Y)
        return self.addnorm3(X, self.ffn(X))
'''},
        "fails": ["test_decoder_block_public", "test_decoder_block"],
        "public": True,
    },
    "decoder_mask_convention_flipped": {
        # True means "may attend" for SDPA but "not allowed" for nn.MultiheadAttention
        "replace": {"decoder_block": _DECODER_INIT + '''
    def forward(self, X, memory, memory_key_padding_mask=None):
        Y, _ = self.self_attention(X, X, X, attn_mask=causal_mask(X.shape[1]), need_weights=False)
        X = self.addnorm1(X, Y)
        Y, _ = self.cross_attention(X, memory, memory, key_padding_mask=memory_key_padding_mask,
                                    need_weights=False)
        X = self.addnorm2(X, Y)
        return self.addnorm3(X, self.ffn(X))
'''},
        "fails": ["test_decoder_block_public", "test_decoder_block"],
        "public": True,
    },
    "cross_attention_queries_from_encoder": {
        # the seed's mistake: the decoder "is the key that queries the encoder"
        "replace": {"decoder_block": _DECODER_INIT + '''
    def forward(self, X, memory, memory_key_padding_mask=None):
        future = ~causal_mask(X.shape[1])
        Y, _ = self.self_attention(X, X, X, attn_mask=future, need_weights=False)
        X = self.addnorm1(X, Y)
        Y, _ = self.cross_attention(memory, X, X, need_weights=False)  # (B, S, E): the encoder asks
        X = self.addnorm2(X, Y)
        return self.addnorm3(X, self.ffn(X))
'''},
        "fails": ["test_decoder_block_public", "test_decoder_block"],
        "hint": "your decoder block equals one whose cross-attention takes its queries from the encoder: the decoder asks (queries), the encoder answers (keys and values)",
        "lesson": "7a",
        "section": 5,
        "public": True,
    },
    "wrong_answers": {
        "replace": {"answers": '''
E_, F_ = VARIANT["q_E"], VARIANT["q_F"]
ANSWER_DECODER_PARAMS = 8 * E_ * E_ + 2 * E_ * F_ + 9 * E_ + F_  # the three layer norms forgotten
ANSWER_LAYERNORM = "a"
ANSWER_CROSS_QUERIES = "a"
'''},
        "fails": ["test_answer_decoder_params", "test_answer_layernorm", "test_answer_cross_queries"],
    },
    "cache_keys_from_query_rows": {
        # in_proj_weight stacks queries, keys, values: the first E rows are the query projection
        "replace": {"cross_cache": _PROJECT_MEMORY.replace('_, w_k, w_v = weights["in_proj_weight"].chunk(3)',
                                                         'w_k, _, w_v = weights["in_proj_weight"].chunk(3)')
                    .replace('_, b_k, b_v = weights["in_proj_bias"].chunk(3)', 'b_k, _, b_v = weights["in_proj_bias"].chunk(3)')
                    + _STEP},
        "fails": ["test_cross_cache_public", "test_cross_cache"],
        "hint": "your keys equal memory projected with the query rows of in_proj_weight: its rows are queries "
                "(0 to E-1), keys (E to 2E-1), values (2E to 3E-1)",
        "lesson": "7a",
        "section": 7,
        "public": True,
    },
    "cache_heads_scrambled": {
        # reshaping straight to (B, H, S, D) mixes positions and heads
        "replace": {"cross_cache": _PROJECT_MEMORY.replace(".reshape(B, S, H, D).transpose(1, 2)", ".reshape(B, H, S, D)")
                    + _STEP},
        "fails": ["test_cross_cache_public", "test_cross_cache"],
        "public": True,
    },
    "step_ignores_padding": {
        "replace": {"cross_cache": _PROJECT_MEMORY + _STEP.replace(
            "    if memory_key_padding_mask is not None:\n"
            "        scores = scores.masked_fill(memory_key_padding_mask[:, None, None, :], float(\"-inf\"))\n", "")},
        "fails": ["test_cross_cache_public", "test_cross_cache"],
        "hint": "your step equals cross-attention that ignores memory_key_padding_mask: set the scores of padded "
                "source positions to -inf before the softmax",
        "lesson": "7a",
        "section": 5,
        "public": True,
    },
    "step_scaled_by_sqrt_E": {
        "replace": {"cross_cache": _PROJECT_MEMORY + _STEP.replace("/ math.sqrt(D)", "/ math.sqrt(E)")},
        "fails": ["test_cross_cache_public", "test_cross_cache"],
        "hint": "your step equals attention whose scores are divided by sqrt(E): divide by sqrt(D), the head size",
        "lesson": "5",
        "section": 3,
        "public": True,
    },
    "step_without_out_proj": {
        "replace": {"cross_cache": _PROJECT_MEMORY + _STEP.replace(
            "return nn.functional.linear(y.transpose(1, 2).reshape(B, L, E), weights[\"out_proj.weight\"], weights[\"out_proj.bias\"])",
            "return y.transpose(1, 2).reshape(B, L, E)")},
        "fails": ["test_cross_cache_public", "test_cross_cache"],
        "public": True,
    },
    "experiment_ratios_inverted": {
        # g_N / g_1 instead of g_1 / g_N
        "replace": {"experiment": _EXPERIMENT.replace("inputs[0].grad.norm() / inputs[-1].grad.norm()",
                                                      "inputs[-1].grad.norm() / inputs[0].grad.norm()")},
        "fails": ["test_experiment"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "transformer.ipynb"))
