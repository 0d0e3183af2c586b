"""Typical mistakes for lesson11_beam, used by tests/test_grading_assignments.py.

Each entry: a learner notebook is built from the SOLUTION by replacing the source of the
cells named in ``replace`` (by nbgrader grade_id); grading it must fail (at least) the
tests in ``fails`` and pass every test not listed in ``fails`` or ``may_fail``, under every
seed (tests/test_grading_fairness.py). ``"public": True`` marks the common mistakes that the
public checks alone (the learner's ``course-grade --check``) must catch.

Each mistake is one small edit of the solution cell (:func:`_edit` checks that the edited
text is really there, so a change to the solution cannot silently turn a mistake into a copy
of the solution). The solution's ``beam_search`` calls the learner's ``beam_step``, so a
mistake in ``beam_step`` fails the search tests too.
"""

from pathlib import Path

from course_tools.grading_dev.testing import solution_editor, trivial_mistakes

_edit = solution_editor(Path(__file__).parent / "beam.ipynb")


_STEP_TESTS = ["test_beam_step_public", "test_beam_step"]
_SEARCH_TESTS = ["test_beam_search_public", "test_beam_search"]
_REORDER_TESTS = ["test_reorder_public", "test_reorder"]

MISTAKES = {
    "top_k_within_each_beam": {
        # top-k over V instead of over W * V: each beam keeps its own best token, beams never
        # compete, and the search is W copies of greedy decoding (the -inf beams stay -inf)
        "replace": _edit("beam_step", (
            "    new_scores, flat = candidates.reshape(B, W * V).topk(W, dim=1)  # (B, W)\n"
            "    return new_scores, flat // V, flat % V\n",
            "    new_scores, tokens = candidates.max(dim=2)  # (B, W): the best token of each beam\n"
            "    return new_scores, torch.arange(W).expand(B, W).clone(), tokens\n")),
        "fails": _STEP_TESTS + _SEARCH_TESTS,
        "hint": "your beam step equals keeping the best token of each beam: choose the W best of all W * V candidates of a sentence",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    "finished_beams_extended": {
        # forgets that a finished beam is kept as it is: it is extended like any other
        "replace": _edit("beam_step", (
            "    candidates = torch.where(finished[:, :, None], frozen, candidates)\n", "")),
        "fails": _STEP_TESTS + ["test_beam_search"],
        "hint": "your beam step equals one that extends beams that already ended with <eos>: a finished beam keeps its score and only continues with padding",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    "parent_divided_by_width": {
        # the flat index is beam * V + token: dividing it by W gives the wrong parent
        "replace": _edit("beam_step", ("flat // V, flat % V", "flat // W, flat % V")),
        "fails": ["test_beam_step"] + _SEARCH_TESTS,
    },
    "beam_step_zeros": {
        # a trivial function: the right shapes, nothing else
        "replace": _edit("beam_step", (
            "    new_scores, flat = candidates.reshape(B, W * V).topk(W, dim=1)  # (B, W)\n"
            "    return new_scores, flat // V, flat % V\n",
            "    zeros = torch.zeros(B, W, dtype=torch.long)\n"
            "    return torch.zeros_like(scores), zeros, zeros.clone()\n")),
        "fails": _STEP_TESTS + _SEARCH_TESTS,
    },
    "reorder_without_sentence_offset": {
        # parents index beams within a sentence: without b * W every sentence reads sentence 0's rows
        "replace": _edit("reorder_cache", (
            "index = (torch.arange(B, device=parents.device)[:, None] * W + parents).reshape(-1)",
            "index = parents.reshape(-1)")),
        "fails": _REORDER_TESTS,
        "hint": "your reordered cache equals indexing by the parent beam alone: add the sentence's offset (b * W) to each parent",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    "reorder_identity": {
        # a trivial function: the cache unchanged
        "replace": _edit("reorder_cache", ("    return cache.index_select(0, index)\n",
                                           "    return cache.clone()\n")),
        "fails": _REORDER_TESTS,
    },
    "state_reordered_by_token": {
        # reorders the decoder state by the new tokens instead of the parent beams
        "replace": _edit("beam_search", ("index = (offsets + parents).reshape(-1)",
                                         "index = tokens.reshape(-1)")),
        "fails": _SEARCH_TESTS,
        "public": True,
    },
    "state_not_reordered": {
        # forgets model.reorder_state: each row continues from its own old state, not its parent's
        "replace": _edit("beam_search", ("        state = model.reorder_state(state, index)\n", "")),
        "fails": ["test_beam_search"],
        "hint": "your search equals one whose decoder state does not follow its beams: after each step, reorder the "
                "state with the parents' rows (model.reorder_state(state, index), the index of part 2)",
        "lesson": "11",
        "section": 4,
        "public": True,  # the ASTRAY example of test_beam_search's public part
    },
    "softmax_not_log_softmax": {
        # adds probabilities instead of log-probabilities
        "replace": _edit("beam_search", ("torch.log_softmax(logits.double(), dim=-1)",
                                         "torch.softmax(logits.double(), dim=-1)")),
        "fails": _SEARCH_TESTS,
        "hint": "your beam scores equal sums of probabilities: add log-probabilities (log_softmax)",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    "length_without_eos": {
        # the length penalty's L leaves out the <eos> of a finished beam
        "replace": _edit("beam_search", (
            "final = scores / lengths.clamp_min(1).double() ** length_penalty",
            "final = scores / (lengths - finished.long()).clamp_min(1).double() ** length_penalty")),
        "fails": _SEARCH_TESTS,
        "public": True,
    },
    "every_copy_alive_at_start": {
        # all W copies start with score 0: they propose the same continuations and the beam
        # holds W duplicates of the best prefix
        "replace": _edit("beam_search", ("    scores[:, 0] = 0.0\n", "    scores[:, :] = 0.0\n")),
        "fails": _SEARCH_TESTS,
        "public": True,
    },
    "wrong_answers": {
        "replace": {"answers": '''
ANSWER_WIDTH1 = "d"
ANSWER_ROWS = 4  # W, not B * W
'''},
        "fails": ["test_answer_width1", "test_answer_rows"],
    },
    # section 4, the transfer task
    "block_last_n_tokens": {
        # matches the last n tokens (not n - 1) against the n-grams' beginnings
        "replace": _edit("block_repeats", ("prefix = h[T - (n - 1):] if n > 1 else []", "prefix = h[T - n:]"),
                         ("if h[s:s + n - 1] == prefix:", "if h[s:s + n] == prefix:")),
        "fails": ["test_block_repeats"],
        "hint": "your blocked tokens equal those of a prefix of n tokens: an n-gram is the last n - 1 tokens plus "
                "the candidate, so compare the last n - 1 tokens with each n-gram's first n - 1",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    "block_every_seen_token": {
        # blocks every token already generated, whatever n (the n = 1 rule)
        "replace": _edit("block_repeats", ("            prefix = h[T - (n - 1):] if n > 1 else []\n"
                                           "            for s in range(T - n + 1):\n"
                                           "                if h[s:s + n - 1] == prefix:\n"
                                           "                    out[b, w, h[s + n - 1]] = -math.inf\n",
                                           "            for t in h:\n"
                                           "                out[b, w, t] = -math.inf\n")),
        "fails": ["test_block_repeats"],
        "hint": "your blocked tokens equal every token already generated: that is the rule for n = 1 only; for "
                "n > 1 block a token only when it would complete an n-gram that already occurred",
        "lesson": "11",
        "section": 4,
        "public": True,
    },
    # section 5, the experiment
    "experiment_swapped": {
        "replace": _edit("experiment", ("ANSWER_MEAN_LEN_0, ANSWER_MEAN_LEN_1 = _lengths",
                                        "ANSWER_MEAN_LEN_1, ANSWER_MEAN_LEN_0 = _lengths")),
        "fails": ["test_experiment_lengths"],
    },
}

# The experiment runs the learner's own beam_search: a mistake in the search may change its figures.
for _m in MISTAKES.values():
    if set(_m["replace"]) & {"beam_step", "beam_search"}:
        _m["may_fail"] = sorted(set(_m.get("may_fail", [])) | {"test_experiment_lengths"})

# Issue 29: every trivial function (zeros, identity, sign flip, a constant, an empty module, None) in
# place of each graded function and class: no test may give one a point.
MISTAKES.update(trivial_mistakes(Path(__file__).parent / "beam.ipynb"))
