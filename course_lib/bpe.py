"""Byte-pair encoding (BPE): a small subword tokenizer learned from the training split.

Shape letters are not needed here: everything is lists of strings.

A word-level vocabulary of real French has tens of thousands of entries, most of them
rare, and the output layer of a translation model costs ``E * V`` parameters and
``B * L * V`` activations per batch. BPE (Sennrich et al., 2016) keeps the vocabulary
small by splitting rare words into frequent pieces: start from single characters, then
repeatedly merge the most frequent adjacent pair of symbols in the training words,
``num_merges`` times. Frequent words end up as one piece, rare ones as a few.

The words are those of :func:`course_lib.data.tokenize` (lower-cased, punctuation and
French elisions split), so a piece never crosses a word boundary. The last piece of each
word carries the end-of-word marker ``</w>``: ``"chantons"`` may become
``["chant", "ons</w>"]``, and decoding glues pieces until a marker, then joins the words
with :func:`course_lib.data.detokenize`.

>>> bpe = BPE.train(["le chat chante.", "les chats chantent."], num_merges=10)
>>> pieces = bpe("les chats")               # a tokenizer: str -> list[str]
>>> bpe.decode(pieces)
'les chats'

A :class:`BPE` is a drop-in ``tokenizer`` for :func:`course_lib.data.build_vocabs` and
:func:`course_lib.data.make_translation_loader`, and its :meth:`BPE.decode` is a
``detokenize`` for :func:`course_lib.decoding.translate`.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from course_lib.data import detokenize, tokenize

__all__ = ["END_OF_WORD", "BPE"]

END_OF_WORD = "</w>"

Pair = tuple[str, str]


def _initial_symbols(word: str) -> list[str]:
    """``"chat"`` -> ``["c", "h", "a", "t</w>"]``."""
    chars = list(word)
    chars[-1] += END_OF_WORD
    return chars


def _pairs_of(symbols: Sequence[str]) -> Iterable[Pair]:
    return zip(symbols, symbols[1:])


def _merge_word(symbols: list[str], pair: Pair) -> list[str]:
    """Replace every occurrence of ``pair`` (left to right, no overlap) by its merge."""
    first, second = pair
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
            out.append(first + second)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class BPE:
    """A trained byte-pair encoding: an ordered list of merges.

    Build one with :meth:`BPE.train`; call it on a sentence to get its pieces.

    Args:
        merges: the merges in the order they were learned (earlier = more frequent).
        tokenizer: splits a sentence into words before the merges apply (default
            :func:`course_lib.data.tokenize`).
    """

    def __init__(self, merges: Sequence[Pair], tokenizer: Callable[[str], list[str]] = tokenize) -> None:
        self.merges: list[Pair] = [(str(a), str(b)) for a, b in merges]
        self.ranks: dict[Pair, int] = {pair: i for i, pair in enumerate(self.merges)}
        if len(self.ranks) != len(self.merges):
            raise ValueError("merges contain a repeated pair; a BPE learns each merge once")
        self.tokenizer = tokenizer
        self._cache: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ training
    @classmethod
    def train(
        cls,
        texts: Iterable[str | Sequence[str]],
        num_merges: int,
        *,
        min_count: int = 2,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> BPE:
        """Learn ``num_merges`` merges from sentences.

        Each step merges the most frequent adjacent pair of symbols, counting every word
        as often as it occurs; ties go to the pair that sorts first, so training is
        deterministic. Pair counts are updated only in the words that contain the merged
        pair, and a heap finds the most frequent pair, so training on 20,000 sentences
        takes seconds.

        Args:
            texts: sentences (strings, split with ``tokenizer``) or lists of words.
            num_merges: how many merges to learn (>= 0); fewer are learned if no pair
                occurs ``min_count`` times any more.
            min_count: stop when the most frequent pair occurs fewer times than this.
            tokenizer: splits a sentence into words.

        Returns:
            The trained :class:`BPE`.
        """
        if num_merges < 0:
            raise ValueError(f"num_merges must be >= 0, got {num_merges}")
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        word_counts: Counter[str] = Counter()
        for text in texts:
            word_counts.update(tokenizer(text) if isinstance(text, str) else list(text))
        if not word_counts:
            raise ValueError("no words to learn from: texts is empty")
        words = [_initial_symbols(w) for w in word_counts]
        freqs = list(word_counts.values())

        pair_counts: dict[Pair, int] = defaultdict(int)
        where: dict[Pair, set[int]] = defaultdict(set)  # pair -> indices of words holding it
        for idx, symbols in enumerate(words):
            for pair in _pairs_of(symbols):
                pair_counts[pair] += freqs[idx]
                where[pair].add(idx)
        heap = [(-count, pair) for pair, count in pair_counts.items()]
        heapq.heapify(heap)

        merges: list[Pair] = []
        while len(merges) < num_merges and heap:
            neg, pair = heapq.heappop(heap)
            if pair_counts.get(pair, 0) != -neg:
                continue  # a stale entry: the count changed after it was pushed
            if -neg < min_count:
                break
            merges.append(pair)
            touched: set[Pair] = set()
            for idx in sorted(where.pop(pair)):
                old = words[idx]
                new = _merge_word(old, pair)
                f = freqs[idx]
                for p in _pairs_of(old):
                    pair_counts[p] -= f
                    touched.add(p)
                for p in _pairs_of(new):
                    pair_counts[p] += f
                    touched.add(p)
                    where[p].add(idx)
                words[idx] = new
            pair_counts.pop(pair, None)
            for p in touched:
                count = pair_counts.get(p, 0)
                if count > 0 and p != pair:
                    heapq.heappush(heap, (-count, p))
                elif count <= 0:
                    pair_counts.pop(p, None)
        return cls(merges, tokenizer=tokenizer)

    # ------------------------------------------------------------------ encoding
    def encode_word(self, word: str) -> list[str]:
        """The pieces of one word; the last one ends with ``</w>``.

        Applies the learned merges in their learned order (lowest rank first), which
        reproduces the segmentation of the training words.
        """
        if not word:
            raise ValueError("cannot encode an empty word")
        cached = self._cache.get(word)
        if cached is not None:
            return list(cached)
        symbols = _initial_symbols(word)
        while len(symbols) > 1:
            ranked = [(self.ranks[p], p) for p in _pairs_of(symbols) if p in self.ranks]
            if not ranked:
                break
            symbols = _merge_word(symbols, min(ranked)[1])
        self._cache[word] = symbols
        return list(symbols)

    def __call__(self, text: str) -> list[str]:
        """Split a sentence into pieces: ``tokenizer(text)``, then each word into pieces."""
        return [piece for word in self.tokenizer(text) for piece in self.encode_word(word)]

    # ------------------------------------------------------------------ decoding
    @staticmethod
    def to_words(pieces: Sequence[str]) -> list[str]:
        """Glue pieces back into words: a word ends at a piece with ``</w>``.

        Special tokens (``<unk>`` ...) and a trailing unfinished word are kept as words.
        """
        words: list[str] = []
        current = ""
        for piece in pieces:
            if piece.endswith(END_OF_WORD):
                words.append(current + piece[: -len(END_OF_WORD)])
                current = ""
            elif piece.startswith("<") and piece.endswith(">"):
                if current:
                    words.append(current)
                    current = ""
                words.append(piece)
            else:
                current += piece
        if current:
            words.append(current)
        return words

    def decode(self, pieces: Sequence[str]) -> str:
        """Readable text from pieces: :meth:`to_words`, then ``detokenize``."""
        return detokenize(self.to_words(pieces))

    # ------------------------------------------------------------------ inspection, saving
    def __len__(self) -> int:
        return len(self.merges)

    def __repr__(self) -> str:
        return f"BPE({len(self.merges)} merges)"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (the merges; the tokenizer is not saved)."""
        return {"format": "course_lib.bpe/1", "merges": [list(p) for p in self.merges]}

    @classmethod
    def from_dict(cls, state: dict[str, Any], tokenizer: Callable[[str], list[str]] = tokenize) -> BPE:
        """Inverse of :meth:`to_dict`."""
        if state.get("format") != "course_lib.bpe/1":
            raise ValueError("not a BPE written by course_lib.bpe (missing or unknown 'format')")
        return cls([tuple(p) for p in state["merges"]], tokenizer=tokenizer)  # type: ignore[misc]

    def save(self, path: str | Path) -> None:
        """Write the merges as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path, tokenizer: Callable[[str], list[str]] = tokenize) -> BPE:
        """Read merges written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")), tokenizer=tokenizer)
