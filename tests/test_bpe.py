"""Tests for course_lib.bpe against a slow, obviously correct reference."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from course_lib.bpe import BPE, END_OF_WORD
from course_lib.data import build_vocabs, detokenize, tokenize


TIER = "fast"  # course_tools/tiers.py


def reference_bpe(word_counts: Counter, num_merges: int, min_count: int = 2):
    """Textbook BPE: recount every pair of every word at every step."""
    words = {w: tuple(w[:-1]) + (w[-1] + END_OF_WORD,) for w in word_counts}
    merges = []
    for _ in range(num_merges):
        counts: Counter = Counter()
        for w, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += word_counts[w]
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))  # most frequent, then smallest
        if counts[best] < min_count:
            break
        merges.append(best)
        for w, symbols in words.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[w] = tuple(out)
    return merges, words


def test_sennrich_example():
    texts = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
    bpe = BPE.train(texts, num_merges=4)
    # es: 9, est</w>: 9, lo: 7, then three pairs occur 6 times (ew, ne, w+est</w>):
    # the tie goes to the smallest pair
    assert bpe.merges == [("e", "s"), ("es", "t</w>"), ("l", "o"), ("e", "w")]
    assert bpe.encode_word("newest") == ["n", "ew", "est</w>"]
    assert bpe.encode_word("lowest") == ["lo", "w", "est</w>"]  # unseen word, known pieces


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merges_and_segmentations_match_the_reference(seed):
    rng = random.Random(seed)
    alphabet = "abcde"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))) for _ in range(60)]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    counts = Counter(w for t in texts for w in tokenize(t))
    expected_merges, expected_words = reference_bpe(counts, 40)
    bpe = BPE.train(texts, num_merges=40)
    assert bpe.merges == expected_merges
    for w, symbols in expected_words.items():
        assert bpe.encode_word(w) == list(symbols)  # encoding reproduces training


def test_round_trip_gives_readable_text_also_for_unseen_words():
    train = ["Je l'ai vu aujourd'hui.", "Il chante, elle chantait.", "Qu'il soit là !"]
    bpe = BPE.train(train, num_merges=30)
    for text in train + ["Nous chantons aujourd'hui, quoi qu'il arrive ?"]:
        pieces = bpe(text)
        assert bpe.decode(pieces) == detokenize(tokenize(text))
        assert BPE.to_words(pieces) == tokenize(text)
        assert sum(p.endswith(END_OF_WORD) for p in pieces) == len(tokenize(text))


def test_merging_shortens_and_min_count_stops():
    texts = ["abab abab abab", "cdcd"]
    bpe = BPE.train(texts, num_merges=100, min_count=2)
    assert all(len(bpe.encode_word(w)) == 1 for w in ["abab"])  # frequent word: one piece
    assert len(bpe.encode_word("cdcd")) > 1  # a word seen once: each of its pairs occurs once
    assert len(bpe) < 100  # stopped early
    assert BPE.train(texts, num_merges=0).encode_word("abab") == ["a", "b", "a", "b</w>"]


def test_to_words_keeps_special_tokens_and_unfinished_words():
    assert BPE.to_words(["je</w>", "<unk>", "chan", "t"]) == ["je", "<unk>", "chant"]


def test_is_a_tokenizer_for_vocabularies(tmp_path):
    pairs = [("I sing.", "Je chante."), ("We sing.", "Nous chantons.")]
    src_bpe = BPE.train([en for en, _ in pairs], 10)
    tgt_bpe = BPE.train([fr for _, fr in pairs], 10)
    src_vocab, _ = build_vocabs(pairs, tokenizer=src_bpe)
    assert all(p in src_vocab for p in src_bpe("We sing."))
    path = tmp_path / "bpe.json"
    tgt_bpe.save(path)
    again = BPE.load(path)
    assert again.merges == tgt_bpe.merges and again("Nous chantons.") == tgt_bpe("Nous chantons.")


def test_errors():
    with pytest.raises(ValueError, match="num_merges"):
        BPE.train(["a"], -1)
    with pytest.raises(ValueError, match="empty"):
        BPE.train([], 5)
    with pytest.raises(ValueError, match="repeated"):
        BPE([("a", "b"), ("a", "b")])
    with pytest.raises(ValueError, match="format"):
        BPE.from_dict({"merges": []})
