"""Typical mistakes for lesson09_scale, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed. ``"public": True`` marks the common mistakes that the public checks alone (the
learner's ``course-grade --check``) catch.

Each mistake is written as one small edit of the solution cell (:func:`_edit` checks that
the edited text is really there, so a change to the solution cannot silently turn a
mistake into a copy of the solution).
"""

from pathlib import Path

from course_tools.grading_dev.testing import solution_editor, trivial_mistakes

_edit = solution_editor(Path(__file__).parent / "scale.ipynb")


_TILED_TESTS = ["test_tiled_public", "test_tiled", "test_tiled_causal", "test_tiled_skips"]

MISTAKES = {
    "running_sum_not_rescaled": {
        # the old sum was computed relative to the old maximum: without the correction it is too large
        "replace": _edit("online_update", ("new_sum = correction * running_sum + ", "new_sum = running_sum + ")),
        "fails": ["test_update_public", "test_update"],
        "hint": "your running sum equals one that is not rescaled when the maximum rises: multiply it by exp(old_max - new_max)",
        "lesson": "9",
        "section": 2,
        "may_fail": _TILED_TESTS,  # tiled_attention calls the learner's update
        "public": True,
    },
    "max_not_subtracted_safely": {
        # exp(-inf - (-inf)) = NaN for a row whose scores are all masked so far
        "replace": _edit("online_update", (
            "reference = torch.where(torch.isneginf(new_max), torch.zeros_like(new_max), new_max)",
            "reference = new_max")),
        "fails": ["test_update"],
        "may_fail": _TILED_TESTS,
    },
    "accumulator_not_rescaled": {
        "replace": _edit("tiled", ("acc = correction * acc + ", "acc = acc + ")),
        "fails": ["test_tiled_public", "test_tiled"],
        "hint": "your tiled attention equals one whose output accumulator is not rescaled when the maximum rises: multiply it by exp(old_max - new_max) too",
        "lesson": "9",
        "section": 3,
        "may_fail": ["test_tiled_causal", "test_tiled_skips"],
        "public": True,
    },
    "accumulator_rescaled_by_inverse": {
        # exp(m' - m) instead of exp(m - m'): the direction of the rescaling reversed
        "replace": _edit("tiled", ("acc = correction * acc + ", "acc = acc / correction + ")),
        "fails": ["test_tiled_public", "test_tiled"],
        "may_fail": ["test_tiled_causal", "test_tiled_skips"],
        "public": True,
    },
    "accumulator_rescaled_by_sum_ratio": {
        # normalising as it goes with the ratio of sums, but then also dividing by the sum at the end
        "replace": _edit("tiled", (
            "running_max, running_sum, correction = online_softmax_update(running_max, running_sum, scores)",
            "old_sum = running_sum\n"
            "            running_max, running_sum, correction = online_softmax_update(running_max, running_sum, scores)\n"
            "            correction = correction * old_sum / running_sum")),
        "fails": ["test_tiled_public", "test_tiled"],
        "may_fail": ["test_tiled_causal", "test_tiled_skips"],
    },
    "causal_diagonal_tile_skipped": {
        # range(0, q_start) instead of range(0, q_end): the diagonal tile (each query's own key) is dropped
        "replace": _edit("tiled", ("last_key = q_end if is_causal", "last_key = q_start if is_causal")),
        "fails": ["test_tiled_public", "test_tiled_causal", "test_tiled_skips"],
        "public": True,
    },
    "causal_diagonal_tile_unmasked": {
        # tiles above the diagonal are skipped, but the diagonal tile lets queries see the keys after them
        "replace": _edit("tiled", ("if is_causal and k_end - 1 > q_start:", "if False:")),
        "fails": ["test_tiled_public", "test_tiled_causal", "test_tiled_skips"],
        "hint": "your causal tiled attention equals one that leaves the diagonal tile unmasked: mask the future positions inside the tiles on the diagonal",
        "lesson": "9",
        "section": 3,
        "public": True,
    },
    "causal_tiles_computed_then_masked": {
        # correct numbers, but every tile is computed: the T x T work the causal tiling should halve
        "replace": _edit("tiled", (
            "last_key = q_end if is_causal else num_steps", "last_key = num_steps"), (
            "if is_causal and k_end - 1 > q_start:", "if is_causal:")),
        "fails": ["test_tiled_skips"],
    },
    "rotary_interleaved_pairs": {
        # pairs (2i, 2i+1), the other convention: right for D = 2 only
        "replace": _edit("rotary", (
            "x1, x2 = x[..., :half], x[..., half:]\n"
            "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)",
            "x1, x2 = x[..., 0::2], x[..., 1::2]\n"
            "    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)")),
        "fails": ["test_rotary_public", "test_rotary"],
        "hint": "your rotation equals one that pairs adjacent entries (0, 1), (2, 3): pair entry i with entry i + D/2, as the lesson does",
        "lesson": "9",
        "section": 5,
        "public": True,
    },
    "rotary_rotated_backwards": {
        # the sign of the sine swapped: still relative, but not RoPE's rotation
        "replace": _edit("rotary", (
            "torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)",
            "torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], dim=-1)")),
        "fails": ["test_rotary_public", "test_rotary"],
        "public": True,
    },
    "rotary_exponent_i_over_D": {
        # theta_i = 10000^(-i/D) with i the pair index: half the exponent it should be
        "replace": _edit("rotary", (
            "torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim",
            "torch.arange(0, half, dtype=torch.float64) / head_dim")),
        "fails": ["test_rotary_public", "test_rotary"],
    },
    # Trivial functions (issue 19 audit): a property test must not give them a point.
    "rotary_identity": {
        # no rotation at all: every score is q . k, trivially "relative"
        "replace": {"rotary": "def apply_rotary(x):\n    return x.clone()"},
        "fails": ["test_rotary_public", "test_rotary", "test_rotary_relative"],
        "public": True,
    },
    "rotary_zero": {
        # zero vectors: every score is 0, trivially "relative"
        "replace": {"rotary": "def apply_rotary(x):\n    return 0 * x"},
        "fails": ["test_rotary_public", "test_rotary", "test_rotary_relative"],
        "public": True,
    },
    "rotary_sign_per_position": {
        # x * (-1)**position (issue 29's red team): relative and length-keeping, but no rotation
        "replace": {"rotary": "def apply_rotary(x):\n"
                              "    signs = 1 - 2 * (torch.arange(x.shape[-2]) % 2)\n"
                              "    return x * signs[:, None].to(x.dtype)"},
        "fails": ["test_rotary_public", "test_rotary", "test_rotary_relative"],
    },
    "gqa_identity": {
        # returns the queries: the right shape, nothing else (the public check used to look at shapes only)
        "replace": _edit("gqa", (
            "    repeats = q.shape[1] // k.shape[1]\n"
            "    return F.scaled_dot_product_attention(q, repeat_kv(k, repeats), repeat_kv(v, repeats), is_causal=is_causal)",
            "    return q.clone()")),
        "fails": ["test_gqa_public", "test_gqa"],
        "public": True,
    },
    "kv_heads_repeated_in_the_wrong_order": {
        # x.repeat cycles through the heads (0, 1, 0, 1) instead of repeating each (0, 0, 1, 1)
        "replace": _edit("gqa", ("x.repeat_interleave(num_repeats, dim=1)", "x.repeat(1, num_repeats, 1, 1)")),
        "fails": ["test_gqa_public", "test_gqa"],
        "hint": "your key/value heads equal copies repeated as a block (repeat): each head's copies must be adjacent (repeat_interleave)",
        "lesson": "9",
        "section": 4,
        "public": True,
    },
    # part 5, the transfer task (ALiBi)
    "alibi_slopes_reversed": {
        # head index 0 gets the gentlest slope 2^-8 instead of the steepest 2^(-8/H)
        "replace": _edit("alibi", ("torch.arange(1, num_heads + 1, dtype=torch.float64)",
                                   "torch.arange(num_heads, 0, -1, dtype=torch.float64)")),
        "fails": ["test_alibi_public", "test_alibi"],
        "hint": "your ALiBi heads equal ones whose slopes run in the reverse order: head index 0 has the steepest "
                "slope 2^(-8/H), the last head the gentlest 2^(-8)",
        "lesson": "9",
        "section": 5,
        "public": True,
    },
    "alibi_bias_added": {
        # + m (p - j): far keys are favoured instead of penalised
        "replace": _edit("alibi", ("bias = (-slopes[:, None, None]", "bias = (slopes[:, None, None]")),
        "fails": ["test_alibi_public", "test_alibi"],
        "hint": "your ALiBi scores equal ones where the distance is added instead of subtracted: a key further back "
                "must get a lower score, -m_h (p_i - j)",
        "lesson": "9",
        "section": 5,
        "public": True,
    },
    "alibi_queries_at_the_start": {
        # query i placed at position i: right for Q = K only, wrong for a decoding step over a cache
        "replace": _edit("alibi", ("torch.arange(num_keys - num_queries, num_keys)[:, None]",
                                   "torch.arange(num_queries)[:, None]")),
        "fails": ["test_alibi_public", "test_alibi"],
        "hint": "your ALiBi attention equals one that puts query i at position i: the queries are the last Q "
                "positions, K - Q + i, as in a decoding step over a cache",
        "lesson": "9",
        "section": 5,
        "public": True,
    },
    "alibi_not_causal": {
        # the penalty |p - j| on both sides, no mask: keys after the query get weight
        "replace": _edit("alibi", (
            "(query_pos - key_pos).to(torch.float64)", "(query_pos - key_pos).abs().to(torch.float64)"), (
            "    scores = scores.masked_fill(key_pos > query_pos, float(\"-inf\"))  # no key after the query\n", "")),
        "fails": ["test_alibi_public", "test_alibi"],
        "public": True,
    },
    # part 6, the debugging task
    "debug_rope_left_unfixed": {
        "replace": _edit("rotary_decode", ("position = torch.tensor([cache_k.shape[-2]])", "position = 1")),
        "fails": ["test_rotary_decode"],
        "hint": "your decoding step equals the colleague's: the new token is rotated as if it stood at position 0; "
                "rotate its query and key at its position P = cache_k.shape[-2] (rotary_cos_sin(torch.tensor([P]), D))",
        "lesson": "9",
        "section": 5,
    },
    "debug_rope_query_not_rotated": {
        # the key rotated at P, the query left as it is: the score no longer depends on the distance only
        "replace": _edit("rotary_decode", ("q, k = rope(q_new, cos, sin), rope(k_new, cos, sin)",
                                           "q, k = q_new, rope(k_new, cos, sin)")),
        "fails": ["test_rotary_decode"],
    },
    "debug_rope_wrong_cause": {
        "replace": {"answer_rope_bug": 'ANSWER_ROPE_BUG = "d"\n'},
        "fails": ["test_answer_rope_bug"],
    },
    # part 7, the experiment
    "experiment_not_normalised": {
        # x . R_n x without dividing by |x|^2: about D times the cosine
        "replace": _edit("experiment", ("((_x * _rot).sum(dim=-1) / (_x * _x).sum(dim=-1)).mean()",
                                        "(_x * _rot).sum(dim=-1).mean()")),
        "fails": ["test_experiment_rope"],
    },
    "experiment_swapped": {
        "replace": _edit("experiment", ("ANSWER_ROPE_NEAR, ANSWER_ROPE_FAR = _sims", "ANSWER_ROPE_FAR, ANSWER_ROPE_NEAR = _sims")),
        "fails": ["test_experiment_rope"],
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_KV_BYTES = 2 * 24 * 16 * 64 * 2
ANSWER_CAUSAL_TILES = 64
'''},
        "fails": ["test_answer_kv", "test_answer_tiles"],
    },
}

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "scale.ipynb"))
