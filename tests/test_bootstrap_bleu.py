"""Tests for course_lib.metrics.paired_bootstrap_bleu (Koehn 2004's paired bootstrap)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from course_lib.metrics import _bleu_from_stats, _bleu_stats, corpus_bleu, paired_bootstrap_bleu

TIER = "fast"  # course_tools/tiers.py

WORDS = "le la les chat chien mange dort vite et qui".split()


def _corpus(seed: int, n: int, multi: bool = False) -> tuple[list[list[str]], list]:
    rng = random.Random(seed)
    refs = [[rng.choice(WORDS) for _ in range(rng.randint(1, 9))] for _ in range(n)]
    hyps = [[w if rng.random() < 0.7 else rng.choice(WORDS) for w in r][: rng.randint(0, len(r) + 1)] for r in refs]
    if multi:
        refs = [[r, [rng.choice(WORDS) for _ in range(rng.randint(1, 9))]] for r in refs]
    return hyps, refs


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("multi", [False, True])
def test_stats_give_corpus_bleu(seed: int, multi: bool) -> None:
    # The per-sentence statistics, summed, give exactly corpus_bleu (smoothing, brevity penalty, zero matches).
    hyps, refs = _corpus(seed, n=[1, 3, 20, 60, 5, 2][seed], multi=multi)
    sums = _bleu_stats(hyps, refs, 4).sum(axis=0, keepdims=True)
    assert float(_bleu_from_stats(sums, 4)[0]) == pytest.approx(corpus_bleu(hyps, refs), abs=1e-9)


def test_stats_edge_cases() -> None:
    # Empty and one-token hypotheses, and orders with no match at all (the "exp" smoothing halves 1/total
    # once per such order: 3- and 4-grams here), one order or several.
    cases = [([[]], [["a"]]), ([["x"]], [["a"]]), ([["a"]], [["a"]]), ([["a", "b"]], [["a", "b", "c", "d"]]),
             ([["a", "b", "x", "c", "d"]], [["a", "b", "c", "d", "e"]]),
             ([["a", "b", "c", "x", "y"], ["p", "q"]], [["a", "b", "c", "d"], ["p", "q", "r"]])]
    for hyps, refs in cases:
        sums = _bleu_stats(hyps, refs, 4).sum(axis=0, keepdims=True)
        assert float(_bleu_from_stats(sums, 4)[0]) == pytest.approx(corpus_bleu(hyps, refs), abs=1e-9)


def test_a_system_against_itself_is_a_zero_interval() -> None:
    hyps, refs = _corpus(0, 50)
    r = paired_bootstrap_bleu(hyps, hyps, refs, n_resamples=200)
    assert r["delta"] == r["low"] == r["high"] == 0.0 and r["a_better"] == 0.0


@pytest.mark.slow  # 0.15 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_clearly_better_system_excludes_zero_and_close_ones_do_not() -> None:
    hyps, refs = _corpus(1, 300)
    perfect = [list(r) for r in refs]
    r = paired_bootstrap_bleu(perfect, hyps, refs, n_resamples=300)
    assert r["bleu_a"] == pytest.approx(100.0) and r["bleu_b"] == pytest.approx(corpus_bleu(hyps, refs))
    assert 0 < r["low"] <= r["delta"] <= r["high"] and r["a_better"] == 1.0
    # Two systems that differ on one sentence of 300: the interval contains 0.
    other = [list(h) for h in hyps]
    other[0] = list(refs[0])
    close = paired_bootstrap_bleu(other, hyps, refs, n_resamples=300)
    assert close["low"] <= 0.0 <= close["high"]
    # Swapping the systems mirrors the interval.
    swapped = paired_bootstrap_bleu(hyps, perfect, refs, n_resamples=300)
    assert swapped["low"] == pytest.approx(-r["high"]) and swapped["high"] == pytest.approx(-r["low"])


@pytest.mark.slow  # 0.28 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_interval_matches_a_slow_reference_bootstrap() -> None:
    # The same draws (numpy default_rng, seed 3), scored with corpus_bleu sentence list by sentence list.
    hyps_a, refs = _corpus(2, 40)
    hyps_b, _ = _corpus(5, 40)
    r = paired_bootstrap_bleu(hyps_a, hyps_b, refs, n_resamples=50, seed=3, confidence=0.9)
    rng = np.random.default_rng(3)
    deltas = []
    for _ in range(50):
        idx = rng.integers(0, 40, 40)
        deltas.append(corpus_bleu([hyps_a[i] for i in idx], [refs[i] for i in idx])
                      - corpus_bleu([hyps_b[i] for i in idx], [refs[i] for i in idx]))
    low, high = np.percentile(deltas, [5, 95])
    assert r["low"] == pytest.approx(low, abs=1e-9) and r["high"] == pytest.approx(high, abs=1e-9)


@pytest.mark.parametrize("kwargs, message", [
    (dict(hypotheses_b=[["a"]]), "same sentences"),
    (dict(n_resamples=0), "n_resamples"),
    (dict(confidence=95), "confidence"),
    (dict(hypotheses_a=[], hypotheses_b=[], references=[]), "no sentences"),
    (dict(hypotheses_a=["a b", "c"]), "token lists"),
])
def test_bad_input(kwargs: dict, message: str) -> None:
    args = dict(hypotheses_a=[["a"], ["b"]], hypotheses_b=[["a"], ["c"]], references=[["a"], ["b"]])
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_bleu(**args)
