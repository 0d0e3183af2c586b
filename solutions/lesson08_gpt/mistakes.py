"""Typical mistakes for lesson08_gpt, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.
"""

from pathlib import Path

from course_tools.grading_dev.testing import trivial_mistakes

_ATTENTION_INIT = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout=0.0):
        super().__init__()
        self.n_embd, self.n_head = n_embd, n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
'''

_STEP_HEAD = '''
def cached_attention_step(attn, x, past_keys, past_values):
    B, T, E = x.shape
    H, D = attn.n_head, E // attn.n_head
    q, k, v = attn.c_attn(x).split(E, dim=2)
    q = q.reshape(B, T, H, D).transpose(1, 2)
    k = k.reshape(B, T, H, D).transpose(1, 2)
    v = v.reshape(B, T, H, D).transpose(1, 2)
'''

_PROBS_HEAD = '''
def next_token_probs(logits, temperature=1.0, top_k=None):
'''

_TOP_P = '''
def top_p_probs(logits, p, temperature=1.0):
    if not 0.0 < p < 1.0:
        raise ValueError(f"top_p_probs: p must be strictly between 0 and 1, got {p}")
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep_sorted = mass_before < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)
'''

_EXPERIMENT = '''
g = torch.Generator().manual_seed(VARIANT["exp_seed"])
exp_logits = VARIANT["exp_scale"] * torch.randn(256, VARIANT["exp_V"], generator=g)


def mean_entropy(probs):
    return float(-(probs * probs.clamp_min(1e-30).log()).sum(dim=-1).mean())


ANSWER_ENTROPY_TAU = mean_entropy(next_token_probs(exp_logits, VARIANT["exp_tau"]))
ANSWER_ENTROPY_ONE = mean_entropy(next_token_probs(exp_logits, 1.0))
ANSWER_NUCLEUS_SIZE = float((top_p_probs(exp_logits, VARIANT["exp_p"]) > 0).sum(dim=-1).double().mean())
'''


MISTAKES = {
    "no_causal_mask": {
        "replace": {"causal_attention": _ATTENTION_INIT + '''
    def forward(self, x):
        B, T, E = x.shape
        H, D = self.n_head, E // self.n_head
        q, k, v = self.c_attn(x).split(E, dim=2)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k = k.reshape(B, T, H, D).transpose(1, 2)
        v = v.reshape(B, T, H, D).transpose(1, 2)
        weights = self.attn_dropout(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1))
        return self.c_proj((weights @ v).transpose(1, 2).reshape(B, T, E))
'''},
        "fails": ["test_causal_attention_public", "test_causal_attention"],
        "hint": "your attention equals one without the causal mask: each token may only attend to itself and earlier tokens",
        "lesson": "8",
        "section": 2,
        "public": True,
    },
    "scrambled_head_reshape": {
        # (B, T, E) viewed directly as (B, H, T, D): heads mix positions and features
        "replace": {"causal_attention": _ATTENTION_INIT + '''
    def forward(self, x):
        B, T, E = x.shape
        H, D = self.n_head, E // self.n_head
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (t.reshape(B, H, T, D) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        future = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
        weights = self.attn_dropout(torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1))
        return self.c_proj((weights @ v).reshape(B, T, E))
'''},
        "fails": ["test_causal_attention_public", "test_causal_attention"],
        "public": True,
    },
    "top_k_keeps_k_plus_one": {
        "replace": {"next_token_probs": _PROBS_HEAD + '''
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        threshold = torch.topk(logits, min(top_k + 1, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < threshold, float("-inf"))  # keeps k + 1 tokens
    return torch.softmax(logits, dim=-1)
'''},
        "fails": ["test_next_token_probs_public", "test_next_token_probs", "test_sampling"],
        "hint": "your probabilities equal a top-k filter that keeps k + 1 tokens: keep the logits >= the k-th largest",
        "lesson": "8",
        "section": 4,
        "public": True,
        "may_fail": ["test_experiment", "test_sampling_public"],
    },
    "temperature_multiplies": {
        "replace": {"next_token_probs": _PROBS_HEAD + '''
    logits = logits * temperature  # sharpens when it should flatten
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    return torch.softmax(logits, dim=-1)
'''},
        "fails": ["test_next_token_probs_public", "test_next_token_probs", "test_sampling"],
        "may_fail": ["test_experiment"],
        "hint": "your probabilities equal logits multiplied by the temperature: divide by it (a higher temperature flattens the distribution)",
        "lesson": "8",
        "section": 4,
        "public": True,
    },
    "top_k_after_softmax_not_renormalised": {
        "replace": {"next_token_probs": _PROBS_HEAD + '''
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = torch.topk(probs, top_k, dim=-1).values[:, -1:]
        probs = probs.masked_fill(probs < kth_largest, 0.0)  # rows no longer sum to one
    return probs
'''},
        "fails": ["test_next_token_probs_public", "test_next_token_probs"],
        "may_fail": ["test_experiment"],
        "hint": "your probabilities equal a softmax whose filtered tokens were zeroed afterwards: set their logits to -inf before the softmax",
        "lesson": "8",
        "section": 4,
        "public": True,
    },
    "top_k_filter_with_zero_logits": {
        # 0 is not -inf: the filtered tokens keep probability exp(0) / Z
        "replace": {"next_token_probs": _PROBS_HEAD + '''
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, 0.0)
    return torch.softmax(logits, dim=-1)
'''},
        "fails": ["test_next_token_probs_public", "test_next_token_probs", "test_sampling"],
        "public": True,
        "may_fail": ["test_experiment", "test_sampling_public"],
    },
    "sampling_ignores_top_k": {
        "replace": {"sample_next_token": '''
def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):
    probs = next_token_probs(logits, temperature)  # top_k not passed on
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
'''},
        "fails": ["test_sampling_public", "test_sampling"],
        "public": True,
    },
    "cache_with_top_left_causal_mask": {
        # F.scaled_dot_product_attention's is_causal aligns the mask to the top-left corner
        "replace": {"cached_step": _STEP_HEAD + '''
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    y = torch.nn.functional.scaled_dot_product_attention(q, keys, values, is_causal=True)
    return attn.c_proj(y.transpose(1, 2).reshape(B, T, E)), keys, values
'''},
        "fails": ["test_kv_cache"],
        "public": True,
    },
    "cache_forgets_the_past": {
        "replace": {"cached_step": _STEP_HEAD + '''
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    # attends only to the new positions: the cache is stored but never used
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    future = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return attn.c_proj((weights @ v).transpose(1, 2).reshape(B, T, E)), keys, values
'''},
        "fails": ["test_kv_cache"],
        "public": True,
    },
    "top_p_drops_the_crossing_token": {
        # keeps only the tokens whose running total including themselves stays below p (and the first)
        "replace": {"top_p": _TOP_P.replace("keep_sorted = mass_before < p",
                                            "keep_sorted = torch.cumsum(sorted_probs, dim=-1) < p\n"
                                            "    keep_sorted[:, 0] = True")},
        "fails": ["test_top_p_public", "test_top_p"],
        "may_fail": ["test_experiment"],
        "hint": "your filter leaves out the token whose probability makes the running total reach p: keep every "
                "token whose more probable predecessors add up to less than p",
        "lesson": "8",
        "section": 4,
        "public": True,
    },
    "top_p_not_renormalised": {
        "replace": {"top_p": _TOP_P.replace("return kept / kept.sum(dim=-1, keepdim=True)", "return kept")},
        "fails": ["test_top_p_public", "test_top_p"],
        "hint": "your probabilities equal the kept tokens' softmax probabilities without renormalising: divide by "
                "their sum so that each row sums to one",
        "lesson": "8",
        "section": 4,
        "public": True,
    },
    "top_p_in_vocabulary_order": {
        # the running total taken in vocabulary order, not from the most probable token down
        "replace": {"top_p": _TOP_P.replace("sorted_probs, order = torch.sort(probs, dim=-1, descending=True)",
                                            "sorted_probs, order = probs, torch.arange(probs.shape[-1]).expand_as(probs)")},
        "fails": ["test_top_p_public", "test_top_p"],
        "may_fail": ["test_experiment"],
        "hint": "your filter adds the probabilities up in vocabulary order: rank the tokens from most to least "
                "probable first",
        "lesson": "8",
        "section": 4,
        "public": True,
    },
    "top_p_accepts_any_p": {
        "replace": {"top_p": _TOP_P.replace(
            "    if not 0.0 < p < 1.0:\n        raise ValueError(f\"top_p_probs: p must be strictly between 0 and 1, got {p}\")\n",
            "")},
        "fails": ["test_top_p_public"],
        "public": True,
    },
    "experiment_entropy_in_bits": {
        "replace": {"experiment": _EXPERIMENT.replace("probs.clamp_min(1e-30).log()", "probs.clamp_min(1e-30).log2()")},
        "fails": ["test_experiment"],
    },
    "experiment_nucleus_after_temperature": {
        # the nucleus measured at exp_tau instead of temperature 1
        "replace": {"experiment": _EXPERIMENT.replace('top_p_probs(exp_logits, VARIANT["exp_p"])',
                                                      'top_p_probs(exp_logits, VARIANT["exp_p"], VARIANT["exp_tau"])')},
        "fails": ["test_experiment"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_HALVES = "a"
ANSWER_MASK_PERCENT = 15
ANSWER_UNCHANGED = 100
'''},
        "fails": ["test_answer_halves", "test_answer_mask_percent", "test_answer_unchanged"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "gpt.ipynb"))
