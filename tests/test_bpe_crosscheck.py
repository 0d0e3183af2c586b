"""course_lib.bpe against subword-nmt, Sennrich's reference implementation of BPE
(Sennrich, Haddow, Birch 2016; https://github.com/rsennrich/subword-nmt).

The property both must share: **the same merges give the same segmentation**. Merges are
learned by one library, written in subword-nmt's codes format (``#version: 0.2``, one pair a
line, end-of-word marker ``</w>``), and applied by both to real sentences from the shipped
Tatoeba sample, in both directions. subword-nmt is in the ``dev`` extra that
``scripts/setup.sh`` installs, so the test is not skipped in a normal set-up; without it the
test fails with the install command.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

from course_lib.bpe import BPE, END_OF_WORD
from course_lib.data import tokenize
from course_lib.fra_eng import load_sample

TIER = "fast"  # course_tools/tiers.py

try:
    from subword_nmt.apply_bpe import BPE as ReferenceBPE
    from subword_nmt.learn_bpe import learn_bpe
except ImportError as err:  # not a skip: the dev extra installs it
    raise ImportError("subword-nmt is missing: `.venv/bin/pip install subword-nmt` "
                      "(it is in pyproject.toml's dev extra, which scripts/setup.sh installs)") from err

Pair = tuple[str, str]


def codes_file(merges: Sequence[Pair]) -> io.StringIO:
    return io.StringIO("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def reference_pieces(merges: Sequence[Pair], words: Sequence[str]) -> list[list[str]]:
    """subword-nmt's segmentation, word by word, its ``@@`` continuation marks removed."""
    ref = ReferenceBPE(codes_file(merges), separator="@@")
    return [[p.removesuffix("@@") for p in ref.segment_tokens([word])] for word in words]


def course_pieces(bpe: BPE, words: Sequence[str]) -> list[list[str]]:
    """course_lib's segmentation, word by word, its ``</w>`` end-of-word mark removed."""
    out = []
    for word in words:
        pieces = bpe.encode_word(word)
        assert pieces[-1].endswith(END_OF_WORD)
        out.append(pieces[:-1] + [pieces[-1][: -len(END_OF_WORD)]])
    return out


@pytest.fixture(scope="module")
def sentences() -> tuple[list[str], list[str]]:
    pairs = load_sample()
    train = [fr for _, fr in pairs[:8_000]]
    held_out = [fr for _, fr in pairs[15_000:]] + [en for en, _ in pairs[15_000:]]
    return train, held_out


def held_out_words(held_out: list[str]) -> list[str]:
    return sorted({w for s in held_out for w in tokenize(s)})


@pytest.mark.slow  # learns 500 merges on 8,000 sentences and segments 3,000 words twice (about 1 s of CPU): the slow tier; the fast tier keeps the 60-merge and merge-order checks
def test_course_merges_segment_like_subword_nmt(sentences):
    train, held_out = sentences
    bpe = BPE.train(train, num_merges=500)
    assert len(bpe) == 500
    words = held_out_words(held_out)             # French and English words, many never seen in training
    assert len(words) > 3000
    expected = reference_pieces(bpe.merges, words)
    assert course_pieces(bpe, words) == expected
    # the comparison can fail: the same merges applied in another order segment real words otherwise
    assert course_pieces(BPE(bpe.merges[::-1]), words) != expected
    # and whole sentences, through the tokenizer
    ref = ReferenceBPE(codes_file(bpe.merges))
    for s in held_out[:300]:
        mine = [p.removesuffix(END_OF_WORD) for p in bpe(s)]
        theirs = [p.removesuffix("@@") for p in ref.segment_tokens(tokenize(s))]
        assert mine == theirs, s


@pytest.mark.slow  # subword-nmt learns 500 merges on 8,000 sentences (about 1 s of CPU): the slow tier; the fast tier keeps the 60-merge and merge-order checks
def test_subword_nmt_merges_segment_like_course_lib(sentences):
    train, held_out = sentences
    words = [" ".join(tokenize(s)) for s in train]
    out = io.StringIO()
    learn_bpe(io.StringIO("\n".join(words) + "\n"), out, 500, min_frequency=2)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("#version: 0.2")
    merges = [tuple(line.split(" ")) for line in lines[1:]]
    assert len(merges) == 500 and all(len(m) == 2 for m in merges)
    bpe = BPE(merges)  # type: ignore[arg-type]
    check = held_out_words(held_out)
    assert course_pieces(bpe, check) == reference_pieces(bpe.merges, check)


@pytest.mark.slow  # 0.25 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_both_learn_the_same_first_merges(sentences):
    # Learning, not only applying: on the same words both pick the most frequent pair. They
    # break ties differently (course_lib: the pair that sorts first; subword-nmt: last), so
    # only the merges before the first tie are compared; there are many.
    train, _ = sentences
    mine = BPE.train(train, num_merges=60).merges
    out = io.StringIO()
    learn_bpe(io.StringIO("\n".join(" ".join(tokenize(s)) for s in train) + "\n"), out, 60, min_frequency=2)
    theirs = [tuple(line.split(" ")) for line in out.getvalue().splitlines()[1:]]
    same = 0
    while same < 60 and mine[same] == theirs[same]:
        same += 1
    assert same >= 20, (same, mine[same], theirs[same])


def test_merge_order_matters_and_both_follow_it():
    # "abc" -> a b c</w>. With ("b", "c</w>") ranked first the result is a | bc; with
    # ("a", "b") first it is ab | c. A segmentation that ignored the order (e.g. applied the
    # merges as a set, or in reverse) would fail one of the two.
    first_bc = [("b", "c</w>"), ("a", "b")]
    first_ab = [("a", "b"), ("b", "c</w>")]
    assert course_pieces(BPE(first_bc), ["abc"]) == reference_pieces(first_bc, ["abc"]) == [["a", "bc"]]
    assert course_pieces(BPE(first_ab), ["abc"]) == reference_pieces(first_ab, ["abc"]) == [["ab", "c"]]
