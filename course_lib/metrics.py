"""BLEU: D2L's sentence-level formula and standard corpus BLEU.

Two different numbers both get called "BLEU", and the course reports both, each under
its own name:

* :func:`bleu` is the sentence-level score D2L defines (and
  :func:`sentence_bleu_d2l_mean` averages it over a test set). For a prediction of length
  ``len_pred`` and a label of length ``len_label``::

      exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ** (1 / 2**n)

  where ``p_n`` is the clipped n-gram precision. The weights ``1/2**n`` favour long
  matches less than standard BLEU's geometric mean, there is no smoothing, and it is on a
  0-1 scale.
* :func:`corpus_bleu` is the corpus BLEU formula of Papineni et al. (2002), computed from
  tokens as sacrebleu computes it: clipped n-gram matches and n-gram counts are *summed
  over the corpus* before the precisions are formed, the geometric mean has equal weights
  ``1/max_n``, the brevity penalty uses the corpus lengths, and the result is on a 0-100
  scale. The mean of sentence scores is not the corpus score.

Both take already tokenized text (lists of string tokens). The library never tokenizes
here, so the number depends on the tokens you pass, and so does its meaning. The lessons
pass the course's own tokens (``course_lib.data.tokenize``: lower-cased, punctuation split
off, French elisions split, ``qu'`` ``elle``) and call the result "the course's BLEU". That
is *not* sacreBLEU's standard score, the one to compare with published figures (Post,
2018): ``sacrebleu.corpus_bleu(detokenized_hypotheses, [raw_references])`` with its
defaults (13a tokenizer, case-sensitive; print ``sacrebleu.BLEU().get_signature()``).
:func:`corpus_bleu` gives sacrebleu's number only in one configuration: the same tokens,
space-joined, with ``tokenize='none'`` and the same smoothing.

:func:`paired_bootstrap_bleu` says how sure a corpus-BLEU difference between two systems on the
same test sentences is: a confidence interval from resampling the sentences (Koehn, 2004).

For sacreBLEU on readable text, :func:`sacrebleu_scores` scores every system the same
way: an unknown-word marker such as ``<unk>`` counts as *one* wrong token
(:func:`mark_unknown_words`; sacreBLEU's 13a tokenizer would otherwise split ``<unk>`` into
three tokens ``< unk >`` that can never match, a penalty only word-vocabulary systems
pay), and it reports single-reference BLEU (each test pair against its own reference,
the standard setting) beside multi-reference BLEU (each distinct source against all its
references), each with its signature.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["bleu", "corpus_bleu", "sentence_bleu_d2l_mean", "ngram_counts", "UNK_MARKERS",
           "UNSCORED_TOKEN", "mark_unknown_words", "sacrebleu_scores", "paired_bootstrap_bleu"]

#: Unknown-word markers that systems print (d2l's and the course's word vocabularies).
UNK_MARKERS: tuple[str, ...] = ("<unk>",)
#: What :func:`mark_unknown_words` puts in their place: U+2047 DOUBLE QUESTION MARK, a
#: single token for sacreBLEU's 13a tokenizer (it splits ASCII punctuation only) that no
#: French reference contains, so it counts as one token and never matches.
UNSCORED_TOKEN = "\u2047"

SmoothMethod = Literal["none", "exp", "floor", "add-k"]

# sacrebleu's defaults for the smoothing constants of "floor" and "add-k".
_SMOOTH_DEFAULTS: dict[str, float | None] = {"none": None, "exp": None, "floor": 0.1, "add-k": 1.0}


def _split_if_str(seq: Sequence[str] | str) -> list[str]:
    # D2L's bleu takes strings and splits on single spaces; accept that form too.
    return seq.split(" ") if isinstance(seq, str) else list(seq)


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Count the n-grams of one token sequence.

    Args:
        tokens: the tokens.
        n: the n-gram order (1 = unigrams).

    Returns:
        A Counter mapping each n-gram (a tuple of n tokens) to how often it occurs.
    """
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def bleu(pred_tokens: Sequence[str] | str, label_tokens: Sequence[str] | str, k: int = 4) -> float:
    """D2L's sentence BLEU of one prediction against one label, on a 0-1 scale.

    ``exp(min(0, 1 - len_label/len_pred)) * prod_{n=1..min(k, len_pred)} p_n ** (1/2**n)``
    with ``p_n`` = (clipped n-gram matches) / (number of n-grams in the prediction).
    This reproduces ``d2l.bleu`` exactly, including its quirks: orders ``n > len_pred``
    are skipped (not counted as zero), and no smoothing, so one order without a match
    gives 0. One deliberate difference: an empty prediction scores 0.0 where d2l
    raises ``ZeroDivisionError``.

    Args:
        pred_tokens: predicted tokens (a string is split on single spaces, as d2l does).
        label_tokens: reference tokens (same).
        k: the largest n-gram order.

    Returns:
        The score in [0, 1].
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    pred, label = _split_if_str(pred_tokens), _split_if_str(label_tokens)
    len_pred, len_label = len(pred), len(label)
    if len_pred == 0:
        return 0.0
    score = math.exp(min(0.0, 1.0 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        pred_ngrams = ngram_counts(pred, n)
        label_ngrams = ngram_counts(label, n)
        matches = sum(min(c, label_ngrams[g]) for g, c in pred_ngrams.items())
        score *= math.pow(matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def sentence_bleu_d2l_mean(
    predictions: Sequence[Sequence[str] | str],
    references: Sequence[Sequence[str] | str],
    k: int = 2,
) -> float:
    """Mean of D2L's :func:`bleu` over a test set, on a 0-1 scale.

    This is what D2L prints after translating its four demo sentences with ``k=2``;
    benchmarks call it "D2L's formula, k=2". It is not corpus BLEU (see
    :func:`corpus_bleu`): each sentence counts equally whatever its length.

    Args:
        predictions: one token list (or space-separated string) per sentence.
        references: one reference per sentence, same length as ``predictions``.
        k: the largest n-gram order (D2L uses 2).

    Returns:
        The mean score in [0, 1].
    """
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references must have the same length, got {len(predictions)} "
            f"and {len(references)}"
        )
    if len(predictions) == 0:
        raise ValueError("sentence_bleu_d2l_mean needs at least one sentence")
    return sum(bleu(p, r, k) for p, r in zip(predictions, references)) / len(predictions)


def _closest_ref_len(hyp_len: int, ref_lens: list[int]) -> int:
    # The reference length closest to the hypothesis; ties go to the shorter one.
    return min(ref_lens, key=lambda r: (abs(hyp_len - r), r))


def _reference_list(hyp: Sequence[str], refs: Any) -> list[Sequence[str]]:
    """One hypothesis's references as a list of token lists (``refs`` is one token list or a
    list of them); ValueError for strings where token lists belong."""
    if isinstance(hyp, str):
        raise ValueError("hypotheses must be token lists, not strings; split them first")
    ref_list: list[Sequence[str]]
    if len(refs) > 0 and not isinstance(refs[0], str):
        ref_list = list(refs)  # several references
    else:
        ref_list = [refs]  # one reference
    if not ref_list or any(isinstance(r, str) for r in ref_list):
        raise ValueError("each reference must be a token list (or a list of token lists)")
    return ref_list


def corpus_bleu(
    hypotheses: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]] | Sequence[Sequence[Sequence[str]]],
    max_n: int = 4,
    smooth: SmoothMethod = "exp",
    smooth_value: float | None = None,
    effective_order: bool = False,
) -> float:
    """Corpus BLEU (Papineni et al. 2002) of token lists, on a 0-100 scale.

    For each order n, clipped matches (each hypothesis n-gram counts at most as often as
    in the reference that has most of it) and hypothesis n-gram totals are summed over
    the corpus; ``p_n = matches_n / total_n``. The score is
    ``100 * BP * exp(mean_n log p_n)`` with ``BP = exp(1 - r/c)`` when the corpus
    hypothesis length ``c`` is below the reference length ``r`` (per sentence, the
    reference length closest to the hypothesis length, ties to the shorter), else 1.
    It equals ``sacrebleu.corpus_bleu(..., tokenize='none', force=True)`` on the same
    tokens, space-joined, with the same smoothing. It is not sacreBLEU's standard score
    (detokenized text against raw references, 13a tokenizer, case-sensitive) unless the
    tokens happen to be the ones 13a would produce from those texts (see the module
    docstring).

    Args:
        hypotheses: one token list per sentence.
        references: one reference token list per sentence, or a list of references
            (each a token list) per sentence. Note the layout: per sentence, not
            sacrebleu's per reference stream.
        max_n: the largest n-gram order.
        smooth: what to do with an order that has no match, as in sacrebleu:
            ``"exp"`` (sacrebleu's default; the k-th such order gets
            ``1 / (2**k * total_n)``), ``"floor"`` (``smooth_value / total_n``),
            ``"add-k"`` (add ``smooth_value`` to matches and totals of orders >= 2), or
            ``"none"`` (the score is 0, as in the original paper).
        smooth_value: the constant of ``"floor"`` (default 0.1) and ``"add-k"`` (default 1).
        effective_order: if True, average only over the orders up to the longest one the
            hypotheses contain (for very short sentences).

    Returns:
        BLEU in [0, 100].
    """
    if smooth not in _SMOOTH_DEFAULTS:
        raise ValueError(f"smooth must be one of {sorted(_SMOOTH_DEFAULTS)}, got {smooth!r}")
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"need one reference (or list of references) per hypothesis: got "
            f"{len(hypotheses)} hypotheses and {len(references)} references"
        )
    if smooth_value is None:
        smooth_value = _SMOOTH_DEFAULTS[smooth]

    matches = [0.0] * max_n
    totals = [0.0] * max_n
    sys_len = ref_len = 0
    for hyp, refs in zip(hypotheses, references):
        ref_list = _reference_list(hyp, refs)
        sys_len += len(hyp)
        ref_len += _closest_ref_len(len(hyp), [len(r) for r in ref_list])
        for n in range(1, max_n + 1):
            hyp_counts = ngram_counts(hyp, n)
            # Clip by the largest count of the n-gram in any one reference.
            max_ref: Counter[tuple[str, ...]] = Counter()
            for r in ref_list:
                for g, c in ngram_counts(r, n).items():
                    max_ref[g] = max(max_ref[g], c)
            matches[n - 1] += sum(min(c, max_ref[g]) for g, c in hyp_counts.items())
            totals[n - 1] += sum(hyp_counts.values())

    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(matches):
        return 0.0

    log_precisions: list[float] = []
    exp_halvings = 1.0
    eff_order = max_n
    for n in range(1, max_n + 1):
        m, t = matches[n - 1], totals[n - 1]
        if smooth == "add-k" and n > 1:
            m, t = m + smooth_value, t + smooth_value  # type: ignore[operator]
        if t == 0:
            break  # no n-grams of this order at all; later orders are empty too
        if effective_order:
            eff_order = n
        if m > 0:
            p = m / t
        elif smooth == "exp":
            exp_halvings *= 2
            p = 1.0 / (exp_halvings * t)
        elif smooth == "floor":
            p = smooth_value / t  # type: ignore[operator]
        else:
            return 0.0  # log 0: the geometric mean is 0
        log_precisions.append(math.log(p))
    if len(log_precisions) < eff_order:
        return 0.0  # an order with no n-grams at all counts as precision 0
    return 100.0 * bp * math.exp(sum(log_precisions[:eff_order]) / eff_order)


def mark_unknown_words(text: str, markers: Sequence[str] = UNK_MARKERS, token: str = UNSCORED_TOKEN) -> str:
    """Replace every unknown-word marker in a hypothesis by one token that matches nothing.

    Each occurrence of a marker becomes ``token`` surrounded by spaces (then runs of
    spaces collapse), so ``"ils sont <unk>."`` -> ``"ils sont \u2047 ."``: sacreBLEU's 13a
    tokenizer sees one wrong word where it would see ``< unk >``, three tokens. Text
    without a marker is returned unchanged.

    Args:
        text: one detokenised hypothesis.
        markers: the strings a system prints for a word it cannot produce.
        token: the replacement; one 13a token that never occurs in a reference.

    Returns:
        The hypothesis, ready for sacreBLEU.
    """
    if not any(m in text for m in markers):
        return text
    for m in markers:
        text = text.replace(m, f" {token} ")
    return " ".join(text.split())


def sacrebleu_scores(
    hyp_of: Mapping[str, str],
    pairs: Sequence[tuple[str, str]],
    *,
    lowercase: bool = True,
    markers: Sequence[str] = UNK_MARKERS,
) -> dict[str, Any]:
    """Single- and multi-reference sacreBLEU of one system on a test set, scored fairly.

    Args:
        hyp_of: the system's translation of every distinct source of ``pairs``.
        pairs: ``(source, reference)`` test pairs; a source with several translations
            appears in several pairs.
        lowercase: sacreBLEU's ``lowercase`` (the course's models output lower case). True
            gives a lower-cased score (``case:lc`` in the signature), not sacreBLEU's standard
            cased one (``case:mixed``, its default).
        markers: unknown-word markers, each scored as one wrong token
            (:func:`mark_unknown_words`), whichever system printed it.

    Returns:
        ``single`` (corpus BLEU over the pairs, each hypothesis against its pair's own
        reference: a source with k translations counts k times; the single-reference setting
        of published figures, which are also cased: comparable with them only with
        ``lowercase=False``, sacreBLEU's default), ``multi`` (over the distinct sources, each
        against all its references), their sacreBLEU ``*_signature`` strings, and
        ``n_pairs``, ``n_sources``, ``unk_outputs`` (how many distinct outputs held a
        marker).

    Raises:
        ValueError: a source of ``pairs`` has no hypothesis, or a reference contains
            :data:`UNSCORED_TOKEN` (it would then match).
    """
    import sacrebleu

    missing = [src for src, _ in pairs if src not in hyp_of]
    if missing:
        raise ValueError(f"no hypothesis for {len(missing)} source(s), e.g. {missing[0]!r}")
    if any(UNSCORED_TOKEN in ref for _, ref in pairs):
        raise ValueError(f"a reference contains {UNSCORED_TOKEN!r}; pick another UNSCORED_TOKEN")
    refs_by_src: dict[str, list[str]] = {}
    for src, ref in pairs:
        refs_by_src.setdefault(src, []).append(ref)
    hyps = {src: mark_unknown_words(hyp_of[src], markers) for src in refs_by_src}
    single = sacrebleu.BLEU(lowercase=lowercase)
    single_score = single.corpus_score([hyps[src] for src, _ in pairs], [[ref for _, ref in pairs]])
    sources = list(refs_by_src)
    width = max(len(r) for r in refs_by_src.values())
    # One stream per reference rank; None where a source has fewer references (sacreBLEU's
    # way of scoring a variable number of references, signature "nrefs:var").
    streams = [[refs_by_src[s][i] if i < len(refs_by_src[s]) else None for s in sources] for i in range(width)]
    multi = sacrebleu.BLEU(lowercase=lowercase)
    multi_score = multi.corpus_score([hyps[s] for s in sources], streams)  # type: ignore[arg-type]
    return {
        "single": single_score.score,
        "single_signature": str(single.get_signature()),
        "multi": multi_score.score,
        "multi_signature": str(multi.get_signature()),
        "n_pairs": len(pairs),
        "n_sources": len(sources),
        "unk_outputs": sum(any(m in hyp_of[s] for m in markers) for s in sources),
    }


def _bleu_stats(
    hypotheses: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]] | Sequence[Sequence[Sequence[str]]],
    max_n: int,
) -> Any:
    # Per sentence: clipped matches (max_n), n-gram totals (max_n), hypothesis length and
    # closest reference length; the sums over a corpus are what corpus_bleu forms its score from.
    import numpy as np

    if len(hypotheses) != len(references):
        raise ValueError(
            f"need one reference (or list of references) per hypothesis: got "
            f"{len(hypotheses)} hypotheses and {len(references)} references"
        )
    stats = np.zeros((len(hypotheses), 2 * max_n + 2))
    for i, (hyp, refs) in enumerate(zip(hypotheses, references)):
        ref_list = _reference_list(hyp, refs)
        stats[i, 2 * max_n] = len(hyp)
        stats[i, 2 * max_n + 1] = _closest_ref_len(len(hyp), [len(r) for r in ref_list])
        for n in range(1, max_n + 1):
            max_ref: Counter[tuple[str, ...]] = Counter()
            for r in ref_list:
                for g, c in ngram_counts(r, n).items():
                    max_ref[g] = max(max_ref[g], c)
            hyp_counts = ngram_counts(hyp, n)
            stats[i, n - 1] = sum(min(c, max_ref[g]) for g, c in hyp_counts.items())
            stats[i, max_n + n - 1] = sum(hyp_counts.values())
    return stats


def _bleu_from_stats(sums: Any, max_n: int) -> Any:
    # corpus_bleu's formula (smooth="exp") on summed statistics, one corpus per row: (R, 2 max_n + 2) -> (R,)
    import numpy as np

    matches, totals = sums[:, :max_n], sums[:, max_n:2 * max_n]
    sys_len, ref_len = sums[:, 2 * max_n], sums[:, 2 * max_n + 1]
    log_p = np.zeros(len(sums))
    halvings = np.ones(len(sums))
    valid = np.ones(len(sums), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for n in range(max_n):
            m, t = matches[:, n], totals[:, n]
            valid &= t > 0                                  # an order with no n-grams at all: BLEU 0
            halvings = np.where(m > 0, halvings, 2 * halvings)
            p = np.where(m > 0, m / t, 1.0 / (halvings * t))
            log_p += np.where(valid, np.log(p), 0.0)
        bp = np.where(sys_len < ref_len, np.exp(1.0 - ref_len / np.maximum(sys_len, 1e-300)), 1.0)
    score = 100.0 * bp * np.exp(log_p / max_n)
    return np.where(valid & (matches.sum(axis=1) > 0) & (sys_len > 0), score, 0.0)


def paired_bootstrap_bleu(
    hypotheses_a: Sequence[Sequence[str]],
    hypotheses_b: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]] | Sequence[Sequence[Sequence[str]]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    max_n: int = 4,
) -> dict[str, float]:
    """Paired bootstrap confidence interval of corpus BLEU(A) - BLEU(B) on the same sentences.

    Koehn (2004): draw the test sentences with replacement ``n_resamples`` times, the same
    draw for both systems (the pairing), and compute both corpus BLEUs on each draw. The
    interval is the central ``confidence`` share of the differences (percentile bootstrap).
    An interval that excludes 0 ranks the two systems on sentences like these; one that
    contains 0 does not. BLEU is :func:`corpus_bleu` with its defaults (``smooth="exp"``),
    computed from per-sentence n-gram statistics, so each draw costs one sum.

    Args:
        hypotheses_a: system A's token list per sentence.
        hypotheses_b: system B's token list per sentence, for the same sentences.
        references: one reference token list (or a list of them) per sentence, as for
            :func:`corpus_bleu`.
        n_resamples: how many bootstrap draws.
        confidence: the interval's coverage, in (0, 1).
        seed: seed of the draws (numpy's ``default_rng``).
        max_n: the largest n-gram order.

    Returns:
        ``bleu_a``, ``bleu_b`` and ``delta`` (``bleu_a - bleu_b``) on the whole test set;
        ``low`` and ``high``, the interval's ends; ``a_better``, the share of draws where A
        scored higher.

    Raises:
        ValueError: the three lists differ in length, are empty, or an argument is out of range.
    """
    import numpy as np

    if not len(hypotheses_a) == len(hypotheses_b) == len(references):
        raise ValueError(
            f"need the same sentences for both systems: got {len(hypotheses_a)} and {len(hypotheses_b)} "
            f"hypotheses and {len(references)} references"
        )
    if len(references) == 0:
        raise ValueError("no sentences to resample")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95, got {confidence}")
    stats_a = _bleu_stats(hypotheses_a, references, max_n)
    stats_b = _bleu_stats(hypotheses_b, references, max_n)
    full_a = float(_bleu_from_stats(stats_a.sum(axis=0, keepdims=True), max_n)[0])
    full_b = float(_bleu_from_stats(stats_b.sum(axis=0, keepdims=True), max_n)[0])
    rng = np.random.default_rng(seed)
    n = len(references)
    # Each draw as counts per sentence, so a draw's statistics are one matrix product.
    counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(n_resamples)])  # (R, N)
    delta = _bleu_from_stats(counts @ stats_a, max_n) - _bleu_from_stats(counts @ stats_b, max_n)    # (R,)
    tail = 100.0 * (1.0 - confidence) / 2
    low, high = np.percentile(delta, [tail, 100.0 - tail])
    return {"bleu_a": full_a, "bleu_b": full_b, "delta": full_a - full_b, "low": float(low),
            "high": float(high), "a_better": float(np.mean(delta > 0))}
