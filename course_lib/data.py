"""Text to tensors: tokenization, vocabularies, padding, batching and synthetic tasks.

A translation model never sees text. It sees integer ids, padded to a common length,
together with the number of real (non-pad) positions of every row, the *valid length*.
This module walks that path:

1. ``tokenize`` / ``char_tokenize`` turn a string into tokens.
2. ``Vocab`` maps tokens to ids, with four reserved tokens in a fixed order:
   ``<pad>`` = 0, ``<bos>`` = 1 (beginning of sequence), ``<eos>`` = 2 (end of sequence),
   ``<unk>`` = 3 (any token the vocabulary has not seen).
3. ``pad_or_truncate`` brings one id list to a given length.
4. ``make_translation_loader`` yields ``Seq2SeqBatch`` objects for encoder-decoder
   training (teacher forcing: the decoder reads ``tgt_in`` and is trained to predict
   ``tgt_out``, the same sentence shifted by one position).
5. ``make_lm_loader`` yields ``(x, y)`` windows for a language model (y = x shifted by one).
6. ``copy_task_pairs`` and ``date_pairs`` generate small synthetic translation tasks.

Shape letters: B batch, S source length, L target length, T block (context) length.

Valid lengths and masks: a row with valid length ``n`` has real tokens at positions
``0 .. n-1`` and ``<pad>`` after them. Its ``real_keys`` row is ``arange(S) < n``, True at the
real tokens (``course_lib.masking`` converts; PyTorch's ``key_padding_mask`` is the negation).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset

__all__ = [
    "check_config",
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "SPECIAL_TOKENS",
    "tokenize",
    "char_tokenize",
    "detokenize",
    "Vocab",
    "pad_or_truncate",
    "Seq2SeqBatch",
    "TranslationDataset",
    "collate_translation",
    "build_vocabs",
    "BucketSampler",
    "make_translation_loader",
    "LMWindows",
    "make_lm_loader",
    "TranslationSplits",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK)

# ---------------------------------------------------------------------------
# Tokenization
# ---------------------------------------------------------------------------

# Tatoeba writes French "?" "!" ":" ";" after a narrow no-break space (U+202F) and uses
# U+00A0 elsewhere; both become ordinary spaces. Curly apostrophes become straight ones.
_SPACE_LIKE = {"\u202f": " ", "\xa0": " ", "\u2009": " ", "\t": " "}
_APOSTROPHES = {"\u2019": "'", "\u2018": "'", "\u02bc": "'"}

# One regular expression, tried left to right at each position:
#   numbers such as 3.5 or 1,000 (kept whole), an ellipsis, one punctuation mark,
#   or a run of anything else that is not a space or punctuation.
_PUNCT = ".,!?;:\"«»()"
_TOKEN_RE = re.compile(
    r"\d+(?:[.,:]\d+)+"  # 3.5  1,000  10:30
    r"|\.\.\."  # ellipsis
    r"|[" + re.escape(_PUNCT) + r"]"  # a single punctuation mark
    r"|[^\s" + re.escape(_PUNCT) + r"]+"  # a word (may contain ' and -)
)

# French words that drop their final vowel before a vowel: l'homme, j'ai, qu'il ...
_ELISION_PREFIXES = frozenset(
    {"l", "j", "d", "m", "n", "s", "t", "c", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu"}
)
# Words that contain an apostrophe but are a single French word.
_NO_SPLIT = frozenset({"aujourd'hui", "prud'homme", "presqu'île"})


def _normalize(text: str) -> str:
    for old, new in {**_SPACE_LIKE, **_APOSTROPHES}.items():
        text = text.replace(old, new)
    return text


def _split_elision(word: str) -> list[str]:
    """``"l'homme"`` -> ``["l'", "homme"]``; English ``"don't"`` stays whole."""
    if "'" not in word or word.lower() in _NO_SPLIT:
        return [word]
    head, _, rest = word.partition("'")
    if head.lower() in _ELISION_PREFIXES and rest:
        return [head + "'", *_split_elision(rest)]
    return [word]


def tokenize(text: str, *, lowercase: bool = True) -> list[str]:
    """Split a sentence into word-level tokens.

    Punctuation (``. , ! ? ; :`` quotes and brackets) becomes its own token, French
    elisions are split after the apostrophe (``"l'homme"`` -> ``["l'", "homme"]``,
    ``"qu'il"`` -> ``["qu'", "il"]``; ``"aujourd'hui"`` stays whole), English
    contractions stay whole (``"don't"``), hyphenated words stay whole (``"est-ce"``),
    and non-breaking spaces (U+00A0, U+202F, used by Tatoeba before ``?`` and ``!``)
    count as spaces.

    Args:
        text: the sentence.
        lowercase: lower-case the text first (the course's default, as in D2L).

    Returns:
        The list of tokens; empty for a blank string.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
    text = _normalize(text)
    if lowercase:
        text = text.lower()
    tokens: list[str] = []
    for piece in _TOKEN_RE.findall(text):
        tokens.extend(_split_elision(piece))
    return tokens


def char_tokenize(text: str, *, lowercase: bool = False) -> list[str]:
    """Split a string into characters (non-breaking spaces become spaces).

    Args:
        text: the string.
        lowercase: lower-case it first.

    Returns:
        One token per character, spaces included.
    """
    if not isinstance(text, str):
        raise TypeError(f"char_tokenize expects a str, got {type(text).__name__}")
    text = _normalize(text)
    return list(text.lower() if lowercase else text)


_NO_SPACE_BEFORE = frozenset(".,!?;:)")


def detokenize(tokens: Sequence[str]) -> str:
    """Join word tokens back into readable text (inverse of ``tokenize`` up to case).

    No space before ``. , ! ? ; : )`` or after an elided ``l'`` / ``j'`` ...

    Args:
        tokens: tokens as produced by ``tokenize``.

    Returns:
        The joined string.
    """
    out = ""
    for tok in tokens:
        if out and not out.endswith("'") and tok not in _NO_SPACE_BEFORE and not out.endswith("("):
            out += " "
        out += tok
    return out


def check_config(config: Any, positive: Sequence[str], width: str | None = None, heads: str | None = None) -> None:
    """The checks of every hyperparameter dataclass (its ``__post_init__``): the ``positive``
    fields are >= 1, ``dropout`` lies in [0, 1), and the model ``width`` is divisible by the
    number of ``heads`` (each head gets width / heads features).

    Raises:
        ValueError: naming the field and its value.
    """
    for name in positive:
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be positive, got {getattr(config, name)}")
    if width is not None and heads is not None and getattr(config, width) % getattr(config, heads):
        size, count = getattr(config, width), getattr(config, heads)
        raise ValueError(f"{width}={size} must be divisible by {heads}={count} (each head gets {width} / "
                         f"{heads} features); e.g. use {width}={count * max(1, round(size / count))}")
    if not 0.0 <= config.dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {config.dropout}")


def check_token_ids(tokens: Any, name: str, letters: str = "(B, T)") -> None:
    """Raise a ValueError that says what was expected unless ``tokens`` is a 2-D integer
    tensor of token ids (any integer dtype: ``nn.Embedding`` takes int32 and int64)."""
    if (not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype.is_floating_point
            or tokens.dtype.is_complex or tokens.dtype == torch.bool):
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        dtype = tokens.dtype if isinstance(tokens, torch.Tensor) else None
        raise ValueError(f"{name} must be an integer tensor of token ids of shape {letters} (e.g. "
                         f"torch.long), got shape {shape} and dtype {dtype}; add a batch axis with "
                         "x[None] and convert with .long()")


# ---------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------


class Vocab:
    """A token <-> id table with ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3.

    After the four reserved tokens come ``extra_tokens`` (e.g. ``"<mask>"`` for a masked
    language model), then every token seen at least ``min_freq`` times, most frequent
    first, ties broken alphabetically, so the same data always gives the same ids.

    Args:
        token_lists: an iterable of token sequences (e.g. tokenized sentences).
        min_freq: tokens seen fewer times map to ``<unk>``.
        extra_tokens: further reserved tokens, placed right after the four specials.

    Example:
        >>> v = Vocab([["a", "b", "a"]])
        >>> v.encode(["a", "b", "zzz"])
        [4, 5, 3]
    """

    def __init__(
        self,
        token_lists: Iterable[Sequence[str]] = (),
        *,
        min_freq: int = 1,
        extra_tokens: Sequence[str] = (),
    ) -> None:
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        if isinstance(token_lists, str):
            raise ValueError(
                "Vocab expects an iterable of token lists, got a str; "
                "use Vocab([tokenize(text)]) or Vocab([char_tokenize(text)])"
            )
        reserved = list(SPECIAL_TOKENS)
        for tok in extra_tokens:
            if tok in reserved:
                raise ValueError(f"extra token {tok!r} is already reserved")
            reserved.append(tok)
        counter: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str) and len(tokens) > 1:
                raise ValueError(
                    f"each item of token_lists must be a list of tokens, got the string "
                    f"{tokens[:30]!r}; tokenize it first"
                )
            counter.update(tokens)
        self.min_freq = min_freq
        self.token_freqs: list[tuple[str, int]] = sorted(
            counter.items(), key=lambda kv: (-kv[1], kv[0])
        )
        reserved_set = set(reserved)
        self.idx_to_token: list[str] = reserved + [
            tok for tok, freq in self.token_freqs if freq >= min_freq and tok not in reserved_set
        ]
        self.token_to_idx: dict[str, int] = {tok: i for i, tok in enumerate(self.idx_to_token)}

    # -- lookups ------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self.token_to_idx

    def __getitem__(self, token: str) -> int:
        """Id of ``token``; unknown tokens give ``self.unk``."""
        return self.token_to_idx.get(token, self.unk)

    def to_token(self, idx: int) -> str:
        """Token with id ``idx`` (raises ``IndexError`` when out of range)."""
        if not 0 <= int(idx) < len(self):
            raise IndexError(f"id {idx} out of range for a vocabulary of size {len(self)}")
        return self.idx_to_token[int(idx)]

    pad, bos, eos, unk = 0, 1, 2, 3  # the ids of SPECIAL_TOKENS, the same in every vocabulary

    @property
    def tokens(self) -> list[str]:
        """All tokens in id order (a copy)."""
        return list(self.idx_to_token)

    # -- encode / decode -----------------------------------------------------
    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Map tokens to ids (unknown tokens -> ``<unk>``)."""
        if isinstance(tokens, str):
            raise ValueError(
                f"encode expects a list of tokens, got the string {tokens[:30]!r}; tokenize it first"
            )
        return [self[tok] for tok in tokens]

    def decode(
        self, ids: Sequence[int] | torch.Tensor, *, strip_special: bool = True
    ) -> list[str]:
        """Map ids back to tokens.

        Args:
            ids: a sequence of ids or a 1-D tensor.
            strip_special: stop at the first ``<eos>`` and drop ``<pad>`` and ``<bos>``.
                ``<unk>`` is kept: it stands for a real word the vocabulary lacks.

        Returns:
            The tokens.
        """
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode expects a 1-D tensor of ids, got shape {tuple(ids.shape)}")
            ids = ids.tolist()
        out: list[str] = []
        for idx in ids:
            idx = int(idx)
            if strip_special:
                if idx == self.eos:
                    break
                if idx in (self.pad, self.bos):
                    continue
            out.append(self.to_token(idx))
        return out

    # -- persistence ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description (store it in a checkpoint)."""
        return {"tokens": list(self.idx_to_token), "min_freq": self.min_freq}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> Vocab:
        """Rebuild a vocabulary saved with ``to_dict`` (ids are preserved exactly)."""
        tokens = list(state.get("tokens", []))
        if tokens[: len(SPECIAL_TOKENS)] != list(SPECIAL_TOKENS):
            raise ValueError(
                f"a saved vocabulary must start with {list(SPECIAL_TOKENS)}, got {tokens[:4]}"
            )
        if len(set(tokens)) != len(tokens):
            raise ValueError("a saved vocabulary contains duplicate tokens")
        vocab = cls(min_freq=int(state.get("min_freq", 1)))
        vocab.idx_to_token = tokens
        vocab.token_to_idx = {tok: i for i, tok in enumerate(tokens)}
        return vocab

    def save(self, path: str | Path) -> None:
        """Write the vocabulary as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Read a vocabulary written by ``save``."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.idx_to_token == other.idx_to_token

    def __repr__(self) -> str:
        head = ", ".join(self.idx_to_token[4:10])
        return f"Vocab(size={len(self)}, first tokens after specials: [{head}])"


def pad_or_truncate(ids: Sequence[int], length: int, pad_id: int) -> tuple[list[int], int]:
    """Cut ``ids`` to ``length`` or pad it with ``pad_id`` up to ``length``.

    Args:
        ids: token ids.
        length: the target length (>= 0).
        pad_id: id used for padding (``vocab.pad``).

    Returns:
        ``(padded, valid_len)`` with ``len(padded) == length`` and
        ``valid_len = min(len(ids), length)``, the number of real tokens kept.
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    ids = list(ids)[:length]
    valid = len(ids)
    return ids + [pad_id] * (length - valid), valid


# ---------------------------------------------------------------------------
# Translation batches
# ---------------------------------------------------------------------------


@dataclass
class Seq2SeqBatch:
    """One padded batch for an encoder-decoder.

    Attributes:
        src: source ids, ``<eos>``-terminated, padded with ``<pad>``. Shape (B, S).
        src_valid_lens: number of non-pad source positions. Shape (B,).
        tgt_in: decoder input, ``<bos>`` + target. Shape (B, L).
        tgt_out: decoder labels, target + ``<eos>``. Shape (B, L).
        tgt_valid_lens: number of non-pad positions of ``tgt_out`` (the positions the
            loss must count). Shape (B,).

    ``tgt_in[:, 1:]`` equals ``tgt_out[:, :-1]`` wherever both are real tokens: the decoder
    reads token t and must predict token t + 1 (teacher forcing).
    """

    src: torch.Tensor
    src_valid_lens: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    tgt_valid_lens: torch.Tensor

    def to(self, device: torch.device | str) -> Seq2SeqBatch:
        """The same batch on ``device``."""
        return Seq2SeqBatch(
            *(getattr(self, name).to(device) for name in self.__dataclass_fields__)
        )

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def as_tuple(self) -> tuple[torch.Tensor, ...]:
        """``(src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens)``."""
        return (self.src, self.src_valid_lens, self.tgt_in, self.tgt_out, self.tgt_valid_lens)


Pair = tuple[Sequence[str], Sequence[str]] | tuple[str, str]


def _tokenized(item: str | Sequence[str], tokenizer: Callable[[str], list[str]]) -> list[str]:
    return tokenizer(item) if isinstance(item, str) else list(item)


class TranslationDataset(Dataset):
    """Encoded (source, target) pairs.

    Each item is ``(src_ids, tgt_ids)``: the source followed by ``<eos>``, and the
    target *without* ``<bos>``/``<eos>`` (the collate function adds them). With
    ``max_len`` the source is cut to ``max_len - 1`` tokens (+ ``<eos>``) and the target to
    ``max_len - 1`` tokens, so every tensor fits in ``max_len`` and ``<eos>`` is never cut off.

    Args:
        pairs: (source, target) pairs, each a string (tokenized with ``tokenizer``)
            or a list of tokens.
        src_vocab: source vocabulary.
        tgt_vocab: target vocabulary.
        max_len: optional cap on S and L (>= 2).
        tokenizer: used for string pairs; default ``tokenize``.
    """

    def __init__(
        self,
        pairs: Sequence[Pair],
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        *,
        max_len: int | None = None,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        if len(pairs) == 0:
            raise ValueError("no pairs given: the translation dataset would be empty")
        if max_len is not None and max_len < 2:
            raise ValueError(f"max_len must be >= 2 (one token + <eos>), got {max_len}")
        self.max_len = max_len
        self.items: list[tuple[list[int], list[int]]] = []
        for i, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"pair {i} must be (source, target), got {len(pair)} items")
            src = src_vocab.encode(_tokenized(pair[0], tokenizer))
            tgt = tgt_vocab.encode(_tokenized(pair[1], tokenizer))
            if max_len is not None:
                src, tgt = src[: max_len - 1], tgt[: max_len - 1]
            self.items.append((src + [src_vocab.eos], tgt))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.items[i]


def collate_translation(
    items: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    length: int | None = None,
) -> Seq2SeqBatch:
    """Pad a list of ``TranslationDataset`` items into a ``Seq2SeqBatch``.

    Args:
        items: ``(src_ids, tgt_ids)`` pairs (source already ``<eos>``-terminated,
            target bare).
        pad_id, bos_id, eos_id: the special ids (0, 1, 2 in every course vocabulary).
        length: pad S and L to exactly this length (fixed length, the D2L way);
            ``None`` pads to the longest sequence of the batch (dynamic padding).

    Returns:
        The batch; see ``Seq2SeqBatch`` for shapes.
    """
    if len(items) == 0:
        raise ValueError("cannot collate an empty batch")
    srcs = [list(s) for s, _ in items]
    tgt_ins = [[bos_id, *t] for _, t in items]
    tgt_outs = [[*t, eos_id] for _, t in items]
    s_len = length if length is not None else max(len(s) for s in srcs)
    l_len = length if length is not None else max(len(t) for t in tgt_outs)
    src_rows, src_valid = zip(*(pad_or_truncate(s, s_len, pad_id) for s in srcs))
    tin_rows = [pad_or_truncate(t, l_len, pad_id)[0] for t in tgt_ins]
    tout_rows, tgt_valid = zip(*(pad_or_truncate(t, l_len, pad_id) for t in tgt_outs))
    return Seq2SeqBatch(
        src=torch.tensor(src_rows, dtype=torch.long),
        src_valid_lens=torch.tensor(src_valid, dtype=torch.long),
        tgt_in=torch.tensor(tin_rows, dtype=torch.long),
        tgt_out=torch.tensor(tout_rows, dtype=torch.long),
        tgt_valid_lens=torch.tensor(tgt_valid, dtype=torch.long),
    )


def build_vocabs(
    pairs: Sequence[Pair],
    min_freq: int = 1,
    *,
    tokenizer: Callable[[str], list[str]] = tokenize,
) -> tuple[Vocab, Vocab]:
    """Build source and target vocabularies from (source, target) pairs.

    Args:
        pairs: pairs of strings (tokenized with ``tokenizer``) or of token lists.
        min_freq: passed to ``Vocab``.
        tokenizer: used for string pairs.

    Returns:
        ``(src_vocab, tgt_vocab)``.
    """
    if len(pairs) == 0:
        raise ValueError("no pairs given: cannot build vocabularies from empty data")
    src = [_tokenized(p[0], tokenizer) for p in pairs]
    tgt = [_tokenized(p[1], tokenizer) for p in pairs]
    return Vocab(src, min_freq=min_freq), Vocab(tgt, min_freq=min_freq)


class BucketSampler:
    """Batches of sentences of similar length, in a new random order every epoch.

    Random batches of sentences of mixed length are mostly padding. This sampler shuffles
    the indices, sorts each pool of ``pool * batch_size`` of them by length, cuts the pool
    into batches and shuffles the batches: batches stay random, but their sentences have
    similar lengths, so dynamic padding wastes little.

    Args:
        lengths: length of each example (e.g. max(source, target + 1) tokens).
        batch_size: examples per batch (>= 1).
        seed: seeds the generator; the same seed gives the same batches, epoch after epoch.
        pool: how many batches' worth of examples are sorted together.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, pool: int = 50) -> None:
        if batch_size < 1 or pool < 1:
            raise ValueError(f"batch_size and pool must be >= 1, got {batch_size} and {pool}")
        self.lengths, self.batch_size, self.pool = list(lengths), batch_size, pool
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.lengths), generator=self.generator).tolist()
        size = self.pool * self.batch_size
        batches: list[list[int]] = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start:start + size], key=lambda i: self.lengths[i])
            batches += [chunk[i:i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        shuffled = torch.randperm(len(batches), generator=self.generator).tolist()
        return iter([batches[i] for i in shuffled])


def make_translation_loader(
    pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    *,
    max_len: int | None = None,
    fixed_length: bool | None = None,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    tokenizer: Callable[[str], list[str]] = tokenize,
    bucket: bool = False,
) -> DataLoader:
    """A ``DataLoader`` of ``Seq2SeqBatch`` for encoder-decoder training.

    Args:
        pairs: (source, target) pairs, strings or token lists.
        src_vocab, tgt_vocab: vocabularies (see ``build_vocabs``).
        batch_size: sentences per batch (>= 1).
        max_len: cap on S and L; longer sentences are truncated, keeping ``<eos>``.
        fixed_length: pad every batch to exactly ``max_len`` (the D2L way). Defaults to
            ``True`` when ``max_len`` is given; ``False`` pads each batch only up to its
            longest sentence (dynamic padding: less wasted compute).
        shuffle: reshuffle every epoch.
        seed: seeds the shuffling generator; the same seed gives the same batches.
        drop_last: drop a final incomplete batch.
        tokenizer: used for string pairs.
        bucket: group sentences of similar length into each batch (:class:`BucketSampler`;
            with dynamic padding this removes most ``<pad>`` positions). Implies shuffling;
            ``drop_last`` must be False.

    Returns:
        A ``DataLoader`` whose batches are ``Seq2SeqBatch`` (src (B, S), tgt_in (B, L) ...).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if fixed_length is None:
        fixed_length = max_len is not None
    if fixed_length and max_len is None:
        raise ValueError("fixed_length=True needs max_len (the length to pad to)")
    dataset = TranslationDataset(pairs, src_vocab, tgt_vocab, max_len=max_len, tokenizer=tokenizer)
    length = max_len if fixed_length else None

    def collate(items: Sequence[tuple[list[int], list[int]]]) -> Seq2SeqBatch:
        return collate_translation(
            items, pad_id=tgt_vocab.pad, bos_id=tgt_vocab.bos, eos_id=tgt_vocab.eos, length=length
        )

    if bucket:
        if drop_last:
            raise ValueError("bucket=True keeps every sentence: drop_last must be False")
        lengths = [max(len(src), len(tgt) + 1) for src, tgt in dataset.items]
        return DataLoader(dataset, batch_sampler=BucketSampler(lengths, batch_size, seed), collate_fn=collate)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        collate_fn=collate,
        generator=generator,
        drop_last=drop_last,
    )


# ---------------------------------------------------------------------------
# Language-model windows
# ---------------------------------------------------------------------------


class LMWindows(Dataset):
    """All windows of ``block_size + 1`` consecutive ids, split into input and target.

    Item i is ``(x, y)`` with ``x = ids[s : s + T]`` and ``y = ids[s + 1 : s + T + 1]``,
    ``s = i * stride``: y is x shifted left by one, so position t of y is the token that
    follows x[: t + 1].

    Args:
        ids: 1-D tensor of token ids.
        block_size: T, the context length (>= 1).
        stride: distance between window starts (1 = every position).
    """

    def __init__(self, ids: torch.Tensor, block_size: int, stride: int = 1) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        if ids.dim() != 1:
            raise ValueError(f"ids must be 1-D (N,), got shape {tuple(ids.shape)}")
        if ids.numel() < block_size + 1:
            raise ValueError(
                f"need at least block_size + 1 = {block_size + 1} tokens, got {ids.numel()}; "
                "use a smaller block_size or more text"
            )
        self.ids = ids.long()
        self.block_size = block_size
        self.stride = stride

    def __len__(self) -> int:
        return (self.ids.numel() - self.block_size - 1) // self.stride + 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = i * self.stride
        chunk = self.ids[s : s + self.block_size + 1]
        return chunk[:-1], chunk[1:]


def make_lm_loader(
    data: str | Sequence[int] | torch.Tensor,
    block_size: int,
    batch_size: int,
    seed: int = 0,
    *,
    vocab: Vocab | None = None,
    stride: int = 1,
    shuffle: bool = True,
    drop_last: bool = True,
) -> DataLoader:
    """A ``DataLoader`` of ``(x, y)`` language-model batches, y = x shifted by one.

    Args:
        data: a string (encoded character by character with ``vocab``) or token ids.
        block_size: T, the context length.
        batch_size: B.
        seed: seeds the shuffling.
        vocab: required when ``data`` is a string, e.g.
            ``Vocab([char_tokenize(text)])``.
        stride: distance between window starts.
        shuffle: sample windows in random order.
        drop_last: drop a final incomplete batch (keeps every batch (B, T)).

    Returns:
        A ``DataLoader`` yielding ``(x, y)``, both of shape (B, T), dtype long.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(data, str):
        if vocab is None:
            raise ValueError(
                "data is text: pass vocab=Vocab([char_tokenize(text)]) to encode it, "
                "or pass token ids"
            )
        ids = torch.tensor(vocab.encode(char_tokenize(data)), dtype=torch.long)
    elif isinstance(data, torch.Tensor):
        ids = data.long().flatten() if data.dim() == 1 else data.long()
    else:
        ids = torch.tensor(list(data), dtype=torch.long)
    if ids.numel() == 0:
        raise ValueError("no data: the language-model corpus is empty")
    dataset = LMWindows(ids, block_size, stride)
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, generator=generator, drop_last=drop_last
    )


# ---------------------------------------------------------------------------
# Translation splits
# ---------------------------------------------------------------------------


@dataclass
class TranslationSplits:
    """Train / validation / test lists of ``(english, french)`` pairs.

    No English sentence occurs in more than one split.
    """

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
