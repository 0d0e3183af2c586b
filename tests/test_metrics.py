"""Tests for course_lib.metrics against d2l's bleu and sacrebleu."""

from __future__ import annotations

import math
import random

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from course_lib.metrics import (
    UNSCORED_TOKEN,
    bleu,
    corpus_bleu,
    mark_unknown_words,
    ngram_counts,
    sacrebleu_scores,
    sentence_bleu_d2l_mean,
)


TIER = "fast"  # course_tools/tiers.py


@pytest.fixture(scope="module")
def d2l():
    from course_lib.d2l_compat import import_d2l

    return import_d2l()


def _random_sentence(rng: random.Random, alphabet: list[str], lo: int, hi: int) -> list[str]:
    return [rng.choice(alphabet) for _ in range(rng.randint(lo, hi))]


def _noisy_copy(rng: random.Random, ref: list[str], alphabet: list[str]) -> list[str]:
    # A hypothesis that shares n-grams with the reference: copy, substitute, drop, insert.
    out: list[str] = []
    for tok in ref:
        r = rng.random()
        if r < 0.15:
            continue
        out.append(rng.choice(alphabet) if r < 0.35 else tok)
        if rng.random() < 0.1:
            out.append(rng.choice(alphabet))
    return out


D2L_PAIRS = [
    ("go .", "va !"),
    ("i lost .", "j'ai perdu ."),
    ("he's calm .", "il est calme ."),
    ("i'm home .", "je suis chez moi ."),
    ("a b c d e f", "a b c d e f"),
    ("a a a a", "a b a c"),
    ("the cat sat on the mat", "the cat is on the mat"),
    ("on the mat the cat sat", "the cat sat on the mat"),
    ("x", "x y z"),
    ("the the the the the the the", "the cat is on the mat"),
    ("a b", "a b c d e f g h"),
    ("a b c d e f g h i", "a b c"),
]


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_bleu_equals_d2l(d2l, k: int) -> None:
    for pred, label in D2L_PAIRS:
        expected = d2l.bleu(pred, label, k)
        assert bleu(pred.split(), label.split(), k) == pytest.approx(expected, abs=1e-12)
        assert bleu(pred, label, k) == pytest.approx(expected, abs=1e-12)  # string form


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_bleu_equals_d2l_random(d2l) -> None:
    rng = random.Random(0)
    alphabet = list("abcde")
    for _ in range(200):
        label = _random_sentence(rng, alphabet, 1, 12)
        pred = _noisy_copy(rng, label, alphabet) or ["a"]
        for k in (2, 4):
            assert bleu(pred, label, k) == pytest.approx(d2l.bleu(" ".join(pred), " ".join(label), k), abs=1e-12)


def test_bleu_hand_computed() -> None:
    # p1 = 3/4, p2 = 2/3, len_pred = len_label -> no penalty.
    assert bleu("a b c d".split(), "a b c e".split(), k=2) == pytest.approx((3 / 4) ** 0.5 * (2 / 3) ** 0.25)
    # Short prediction: exp(1 - 3/1) brevity penalty, p1 = 1.
    assert bleu(["x"], ["x", "y", "z"], k=4) == pytest.approx(math.exp(-2))
    # Clipping: "a a a a" against "a b a c" has 2 matched unigrams, not 4.
    assert bleu("a a a a".split(), "a b a c".split(), k=1) == pytest.approx(0.5 ** 0.5)
    assert bleu("a b c".split(), "a b c".split()) == 1.0
    assert bleu([], ["a"]) == 0.0


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_sentence_bleu_d2l_mean(d2l) -> None:
    preds = [p for p, _ in D2L_PAIRS]
    labels = [label for _, label in D2L_PAIRS]
    expected = sum(d2l.bleu(p, lab, 2) for p, lab in D2L_PAIRS) / len(D2L_PAIRS)
    assert sentence_bleu_d2l_mean([p.split() for p in preds], [lab.split() for lab in labels]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="same length"):
        sentence_bleu_d2l_mean(preds, labels[:-1])


def test_ngram_counts() -> None:
    assert ngram_counts("a b a b".split(), 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert ngram_counts(["a"], 2) == {}


def _sacre(hyps, refs_per_sentence, smooth, **kw) -> float:
    # sacrebleu wants reference *streams*: streams[j][i] is reference j of sentence i.
    n_refs = len(refs_per_sentence[0])
    streams = [[" ".join(refs[j]) for refs in refs_per_sentence] for j in range(n_refs)]
    metric = BLEU(tokenize="none", force=True, smooth_method=smooth, **kw)
    return metric.corpus_score([" ".join(h) for h in hyps], streams).score


@pytest.mark.parametrize("smooth", ["none", "exp", "floor", "add-k"])
def test_corpus_bleu_equals_sacrebleu_random(smooth: str) -> None:
    rng = random.Random(["none", "exp", "floor", "add-k"].index(smooth))
    alphabet = [f"w{i}" for i in range(8)]
    for trial in range(12):
        n_sent = rng.randint(1, 8)
        n_refs = 1 if trial % 2 == 0 else rng.randint(2, 3)
        refs = [[_random_sentence(rng, alphabet, 1, 10) for _ in range(n_refs)] for _ in range(n_sent)]
        hyps = [_noisy_copy(rng, r[0], alphabet) for r in refs]
        expected = _sacre(hyps, refs, smooth)
        ours = corpus_bleu(hyps, refs if n_refs > 1 else [r[0] for r in refs], smooth=smooth)  # type: ignore[arg-type]
        assert ours == pytest.approx(expected, abs=1e-6), (trial, hyps, refs)


def test_corpus_bleu_matches_compat_api_and_options() -> None:
    rng = random.Random(1)
    alphabet = [f"t{i}" for i in range(6)]
    refs = [_random_sentence(rng, alphabet, 1, 6) for _ in range(10)]
    hyps = [_noisy_copy(rng, r, alphabet) for r in refs]
    hyp_str, ref_str = [" ".join(h) for h in hyps], [" ".join(r) for r in refs]
    expected = sacrebleu.corpus_bleu(hyp_str, [ref_str], tokenize="none", force=True).score
    assert corpus_bleu(hyps, refs) == pytest.approx(expected, abs=1e-6)  # default smoothing "exp"
    for max_n in (1, 2, 3):
        for eff in (False, True):
            exp = _sacre(hyps, [[r] for r in refs], "exp", max_ngram_order=max_n, effective_order=eff)
            assert corpus_bleu(hyps, refs, max_n=max_n, effective_order=eff) == pytest.approx(exp, abs=1e-6)
    # Short sentences with no 4-grams at all: effective_order changes the answer.
    short_h, short_r = [["a", "b"]], [["a", "b", "c"]]
    for eff in (False, True):
        exp = _sacre(short_h, [[r] for r in short_r], "none", effective_order=eff)
        assert corpus_bleu(short_h, short_r, smooth="none", effective_order=eff) == pytest.approx(exp, abs=1e-6)


def test_corpus_bleu_properties() -> None:
    refs = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "ran", "home"]]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)
    assert corpus_bleu([["x"], ["y"]], refs) == 0.0
    assert corpus_bleu([[], []], refs) == 0.0
    # Corpus BLEU is not the mean of sentence BLEUs: pooling counts differs.
    hyps = [["the", "cat", "sat", "on", "the", "mat"], ["a", "cat"]]
    pooled = corpus_bleu(hyps, refs, smooth="none", max_n=2)
    mean = sum(corpus_bleu([h], [r], smooth="none", max_n=2) for h, r in zip(hyps, refs)) / 2
    assert pooled != pytest.approx(mean)
    with pytest.raises(ValueError, match="one reference"):
        corpus_bleu(hyps, refs[:1])
    with pytest.raises(ValueError, match="smooth"):
        corpus_bleu(hyps, refs, smooth="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token lists"):
        corpus_bleu(["the cat"], [["the", "cat"]])  # type: ignore[list-item]


def test_course_bleu_is_not_standard_sacrebleu() -> None:
    # The lessons' BLEU (corpus_bleu on the course's lower-cased tokens) equals sacrebleu only
    # with tokenize="none" on those tokens; sacreBLEU's standard score (detokenised output
    # against the raw references, 13a, case-sensitive) is another number.
    from course_lib.data import detokenize, tokenize

    raw_refs = ["Est-ce qu'elle dort ?", "Le vieil homme ne voit pas l'hôpital.", "Je suis sur la chaise."]
    hyps = [tokenize("est-ce qu'elle dort ?"), tokenize("le vieil homme voit l'hôpital ."), tokenize("je suis sur la chaise .")]
    refs = [tokenize(r) for r in raw_refs]
    course = corpus_bleu(hyps, refs)
    same_tokens = sacrebleu.corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in refs]],
                                        tokenize="none", force=True).score
    assert course == pytest.approx(same_tokens, abs=1e-9)
    metric = BLEU()
    standard = metric.corpus_score([detokenize(h) for h in hyps], [raw_refs]).score
    assert "|case:mixed|eff:no|tok:13a|smooth:exp|" in str(metric.get_signature())
    assert standard < course - 5  # capitals in the references and 13a's whole "qu'elle" cost points


# --------------------------------------------------------------------------- fair sacreBLEU


REF_A = "le chat est assis sur le tapis rouge ."
REF_B = "nous avons mangé une pomme verte hier soir ."


def test_mark_unknown_words_makes_each_marker_one_token():
    assert mark_unknown_words("ils sont <unk>.") == f"ils sont {UNSCORED_TOKEN} ."
    assert mark_unknown_words("<unk><unk> chat") == f"{UNSCORED_TOKEN} {UNSCORED_TOKEN} chat"
    assert mark_unknown_words("rien à changer  ici") == "rien à changer  ici"  # untouched without a marker
    tok = sacrebleu.BLEU().tokenizer  # 13a
    assert tok(mark_unknown_words("il est <unk> .")).split() == ["il", "est", UNSCORED_TOKEN, "."]
    assert tok("il est <unk> .").split() == ["il", "est", "<", "unk", ">", "."]  # what the rule avoids


def test_a_system_that_outputs_unk_is_scored_as_one_wrong_token():
    pairs = [("The cat sits on the red mat.", REF_A), ("We ate a green apple last night.", REF_B)]
    hyp_unk = {pairs[0][0]: "le chat est <unk> sur le tapis rouge .", pairs[1][0]: REF_B}
    # The same output with an ordinary wrong word in place of <unk>: one token, no match.
    hyp_word = {pairs[0][0]: "le chat est couché sur le tapis rouge .", pairs[1][0]: REF_B}
    refs = [[REF_A, REF_B]]
    expected = sacrebleu.corpus_bleu(list(hyp_word.values()), refs, lowercase=True).score
    three_tokens = sacrebleu.corpus_bleu(list(hyp_unk.values()), refs, lowercase=True).score
    assert three_tokens < expected - 1  # sacreBLEU on the raw text would penalise <unk> more
    got = sacrebleu_scores(hyp_unk, pairs)
    assert got["single"] == pytest.approx(expected)
    assert got["multi"] == pytest.approx(expected)  # one reference each: both settings agree
    assert got["unk_outputs"] == 1 and got["n_pairs"] == 2 and got["n_sources"] == 2
    assert sacrebleu_scores(hyp_word, pairs)["single"] == pytest.approx(expected)


def test_single_reference_scores_each_pair_against_its_own_reference():
    # One source with two translations: outputting the first one is perfect against all
    # references (multi) but only half right pair by pair (single).
    alt = "hier soir nous avons mangé une pomme verte ."
    pairs = [("The cat sits on the red mat.", REF_A), ("We ate a green apple last night.", REF_B),
             ("We ate a green apple last night.", alt)]
    hyp_of = {src: ref for src, ref in reversed(pairs)}  # the first reference of each source
    got = sacrebleu_scores(hyp_of, pairs)
    assert got["multi"] == pytest.approx(100.0)
    single = sacrebleu.corpus_bleu([REF_A, REF_B, REF_B], [[REF_A, REF_B, alt]], lowercase=True).score
    assert got["single"] == pytest.approx(single) and got["single"] < 90
    assert got["single_signature"].startswith("nrefs:1|") and got["multi_signature"].startswith("nrefs:var|")
    assert (got["n_pairs"], got["n_sources"]) == (3, 2)


def test_sacrebleu_scores_errors():
    pairs = [("A.", REF_A)]
    with pytest.raises(ValueError, match="no hypothesis"):
        sacrebleu_scores({}, pairs)
    with pytest.raises(ValueError, match="reference contains"):
        sacrebleu_scores({"A.": "x"}, [("A.", f"le {UNSCORED_TOKEN} .")])
