"""Tests for course_lib.data: tokenizer, vocabulary, batching, synthetic tasks."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter

import pytest
import torch

from course_lib.tasks import copy_task_pairs, date_pairs
from course_lib.data import (
    LMWindows,
    Seq2SeqBatch,
    Vocab,
    build_vocabs,
    char_tokenize,
    detokenize,
    make_lm_loader,
    make_translation_loader,
    pad_or_truncate,
    tokenize,
)

# --------------------------------------------------------------------------- tokenize


TIER = "fast"  # course_tools/tiers.py


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Go.", ["go", "."]),
        ("Hello, world!", ["hello", ",", "world", "!"]),
        ("L'homme qu'il voit.", ["l'", "homme", "qu'", "il", "voit", "."]),
        ("J'ai faim\u202f!", ["j'", "ai", "faim", "!"]),
        ("Où es-tu\xa0?", ["où", "es-tu", "?"]),
        ("C’est aujourd'hui.", ["c'", "est", "aujourd'hui", "."]),
        ("I don't know...", ["i", "don't", "know", "..."]),
        ("It costs 3.5 euros; ok: yes", ["it", "costs", "3.5", "euros", ";", "ok", ":", "yes"]),
        ("   ", []),
    ],
)
def test_tokenize_examples(text, expected):
    assert tokenize(text) == expected


def test_tokenize_keeps_case_when_asked_and_rejects_non_strings():
    assert tokenize("Tom est là.", lowercase=False) == ["Tom", "est", "là", "."]
    with pytest.raises(TypeError):
        tokenize(["not", "a", "string"])  # type: ignore[arg-type]


def test_detokenize_inverts_tokenize_on_plain_sentences():
    for s in ["l'homme qu'il voit, c'est bon.", "i don't know!", "où es-tu?"]:
        assert detokenize(tokenize(s)) == s


def test_char_tokenize():
    assert char_tokenize("Ab c\u202f!") == ["A", "b", " ", "c", " ", "!"]
    assert char_tokenize("Ab", lowercase=True) == ["a", "b"]


# --------------------------------------------------------------------------- Vocab


def test_vocab_reserved_ids_and_deterministic_order():
    data = [["b", "a", "c", "a"], ["c", "d", "a"], ["b"]]
    v = Vocab(data)
    assert v.tokens[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (v.pad, v.bos, v.eos, v.unk) == (0, 1, 2, 3)
    # brute force: frequency descending, ties alphabetical
    counts = Counter(t for s in data for t in s)
    expected = sorted(counts, key=lambda t: (-counts[t], t))
    assert v.tokens[4:] == expected == ["a", "b", "c", "d"]
    # order of input sentences does not matter
    assert Vocab(list(reversed(data))) == v


def test_vocab_min_freq_unknown_and_encode_decode():
    v = Vocab([["x", "x", "y", "z", "z", "z"]], min_freq=2)
    assert "y" not in v and len(v) == 6
    assert v["y"] == v.unk and v["never"] == v.unk
    ids = v.encode(["z", "x", "y"])
    assert ids == [4, 5, 3]
    assert v.decode(ids) == ["z", "x", "<unk>"]  # <unk> is kept: it stands for a word
    # decode strips <bos>/<pad> and stops at the first <eos>
    assert v.decode([1, 4, 5, 2, 4, 0]) == ["z", "x"]
    assert v.decode(torch.tensor([1, 4, 0, 5, 2, 4])) == ["z", "x"]
    assert v.decode([1, 4, 2, 0], strip_special=False) == ["<bos>", "z", "<eos>", "<pad>"]


def test_vocab_special_tokens_in_data_are_not_duplicated_and_extra_tokens():
    v = Vocab([["<eos>", "a", "<pad>"]], extra_tokens=["<mask>"])
    assert v.tokens == ["<pad>", "<bos>", "<eos>", "<unk>", "<mask>", "a"]
    assert v["<mask>"] == 4


def test_vocab_roundtrip_dict_and_json(tmp_path):
    v = Vocab([list("hello world")], extra_tokens=["<mask>"])
    w = Vocab.from_dict(v.to_dict())
    assert w == v and w.encode(list("low")) == v.encode(list("low"))
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == v
    with pytest.raises(ValueError, match="must start with"):
        Vocab.from_dict({"tokens": ["a", "b"]})


def test_vocab_errors():
    with pytest.raises(ValueError, match="min_freq"):
        Vocab([["a"]], min_freq=0)
    with pytest.raises(ValueError, match="tokenize it first"):
        Vocab(["a sentence, not tokens"])
    with pytest.raises(ValueError, match="tokenize it first"):
        Vocab([["a"]]).encode("a")  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        Vocab([["a"]]).decode([99])


# --------------------------------------------------------------------------- padding


def test_pad_or_truncate():
    assert pad_or_truncate([5, 6, 7], 5, 0) == ([5, 6, 7, 0, 0], 3)
    assert pad_or_truncate([5, 6, 7], 2, 0) == ([5, 6], 2)
    assert pad_or_truncate([], 2, 9) == ([9, 9], 0)
    with pytest.raises(ValueError, match="length"):
        pad_or_truncate([1], -1, 0)


# --------------------------------------------------------------------------- translation loader

PAIRS = [
    ("the cat sleeps .", "le chat dort ."),
    ("i see the red car .", "je vois la voiture rouge ."),
    ("go .", "va !"),
    ("he often eats the big green apple today .", "il mange souvent la grande pomme verte aujourd'hui ."),
    ("we walk .", "nous marchons ."),
]


def _check_batch(batch: Seq2SeqBatch, src_vocab: Vocab, tgt_vocab: Vocab, max_len=None):
    B, S = batch.src.shape
    L = batch.tgt_in.shape[1]
    assert batch.tgt_out.shape == (B, L) and batch.src_valid_lens.shape == (B,)
    assert batch.tgt_valid_lens.shape == (B,)
    for b in range(B):
        n, m = int(batch.src_valid_lens[b]), int(batch.tgt_valid_lens[b])
        src, tin, tout = batch.src[b].tolist(), batch.tgt_in[b].tolist(), batch.tgt_out[b].tolist()
        # brute-force valid lengths: count non-pad positions
        assert n == sum(t != 0 for t in src) and m == sum(t != 0 for t in tout)
        assert src[n - 1] == src_vocab.eos and all(t == 0 for t in src[n:])
        assert tin[0] == tgt_vocab.bos and tout[m - 1] == tgt_vocab.eos
        assert all(t == 0 for t in tin[m:]) and all(t == 0 for t in tout[m:])
        # teacher forcing: the decoder reads token t and must predict token t + 1
        assert tin[1:m] == tout[: m - 1]
        if max_len is not None:
            assert n <= max_len and m <= max_len


def test_translation_loader_dynamic_padding_covers_every_pair_once():
    sv, tv = build_vocabs(PAIRS)
    loader = make_translation_loader(PAIRS, sv, tv, batch_size=2, shuffle=True, seed=1)
    seen = []
    for batch in loader:
        assert isinstance(batch, Seq2SeqBatch)
        _check_batch(batch, sv, tv)
        # dynamic padding: the longest row of the batch has no padding
        assert int(batch.src_valid_lens.max()) == batch.src.shape[1]
        assert int(batch.tgt_valid_lens.max()) == batch.tgt_out.shape[1]
        for b in range(len(batch)):
            seen.append((" ".join(sv.decode(batch.src[b])), " ".join(tv.decode(batch.tgt_out[b]))))
    assert sorted(seen) == sorted(PAIRS)


def test_translation_loader_fixed_length_truncates_but_keeps_eos():
    sv, tv = build_vocabs(PAIRS)
    loader = make_translation_loader(PAIRS, sv, tv, batch_size=5, max_len=4, shuffle=False)
    (batch,) = list(loader)
    assert batch.src.shape == (5, 4) and batch.tgt_in.shape == (5, 4)
    _check_batch(batch, sv, tv, max_len=4)
    # the long sentence is cut to 3 tokens + <eos>
    assert sv.decode(batch.src[3]) == ["he", "often", "eats"]
    assert batch.src[3].tolist()[-1] == sv.eos
    assert tv.decode(batch.tgt_out[3]) == ["il", "mange", "souvent"]
    # a short sentence is padded to max_len
    assert batch.src[2].tolist() == [sv["go"], sv["."], sv.eos, sv.pad]


def test_translation_loader_max_len_with_dynamic_padding():
    sv, tv = build_vocabs(PAIRS)
    batch = next(iter(make_translation_loader(
        PAIRS[:1], sv, tv, batch_size=1, max_len=30, fixed_length=False, shuffle=False)))
    assert batch.src.shape == (1, 5) and batch.tgt_in.shape == (1, 5)


def test_translation_loader_is_deterministic_given_seed():
    pairs = copy_task_pairs(40, 1, 6, seed=3)
    sv, tv = build_vocabs(pairs)

    def order(seed):
        loader = make_translation_loader(pairs, sv, tv, batch_size=8, seed=seed)
        return [b.src.tolist() for b in loader]

    assert order(0) == order(0)
    assert order(0) != order(1)
    # each new epoch of one loader reshuffles
    loader = make_translation_loader(pairs, sv, tv, batch_size=8, seed=0)
    assert [b.src.tolist() for b in loader] != [b.src.tolist() for b in loader]


def test_translation_loader_accepts_token_lists_and_unknown_words():
    pairs = [(["a", "b"], ["x"]), (["c"], ["y", "z"])]
    sv, tv = build_vocabs(pairs[:1])
    batch = next(iter(make_translation_loader(pairs, sv, tv, batch_size=2, shuffle=False)))
    assert batch.src[1].tolist()[0] == sv.unk
    assert batch.to("cpu").src.equal(batch.src)
    assert len(batch.as_tuple()) == 5


def test_translation_loader_errors():
    sv, tv = build_vocabs(PAIRS)
    with pytest.raises(ValueError, match="empty"):
        make_translation_loader([], sv, tv, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        make_translation_loader(PAIRS, sv, tv, batch_size=0)
    with pytest.raises(ValueError, match="max_len"):
        make_translation_loader(PAIRS, sv, tv, batch_size=2, max_len=1)
    with pytest.raises(ValueError, match="needs max_len"):
        make_translation_loader(PAIRS, sv, tv, batch_size=2, fixed_length=True)
    with pytest.raises(ValueError, match="empty"):
        build_vocabs([])


# --------------------------------------------------------------------------- language model


def test_lm_loader_windows_are_shifted_slices():
    text = "hello attention world"
    vocab = Vocab([char_tokenize(text)])
    ids = vocab.encode(char_tokenize(text))
    loader = make_lm_loader(text, block_size=5, batch_size=4, seed=0, vocab=vocab)
    n_windows = 0
    for x, y in loader:
        assert x.shape == y.shape == (4, 5) and x.dtype == torch.long
        assert torch.equal(x[:, 1:], y[:, :-1])
        for row_x, row_y in zip(x.tolist(), y.tolist()):
            # brute force: the window is a contiguous slice of the corpus
            starts = [s for s in range(len(ids) - 5) if ids[s : s + 5] == row_x]
            assert any(ids[s + 1 : s + 6] == row_y for s in starts)
        n_windows += len(x)
    assert n_windows == (len(ids) - 5) // 4 * 4  # drop_last
    assert len(LMWindows(torch.tensor(ids), 5)) == len(ids) - 5
    assert len(LMWindows(torch.tensor(ids), 5, stride=5)) == (len(ids) - 6) // 5 + 1


def test_lm_loader_deterministic_and_errors():
    ids = list(range(50))
    a = [x.tolist() for x, _ in make_lm_loader(ids, 4, 3, seed=7)]
    b = [x.tolist() for x, _ in make_lm_loader(torch.tensor(ids), 4, 3, seed=7)]
    assert a == b and a != [x.tolist() for x, _ in make_lm_loader(ids, 4, 3, seed=8)]
    with pytest.raises(ValueError, match="vocab="):
        make_lm_loader("some text", 4, 2)
    with pytest.raises(ValueError, match="block_size"):
        make_lm_loader(ids, 0, 2)
    with pytest.raises(ValueError, match="at least"):
        make_lm_loader([1, 2, 3], 4, 2)
    with pytest.raises(ValueError, match="empty"):
        make_lm_loader([], 4, 2)


# --------------------------------------------------------------------------- synthetic tasks


def test_copy_task_pairs():
    pairs = copy_task_pairs(200, 2, 7, alphabet="xyz", seed=0)
    assert len(pairs) == 200
    assert {len(s) for s, _ in pairs} == set(range(2, 8))
    assert all(s == t and set(s) <= set("xyz") for s, t in pairs)
    rev = copy_task_pairs(200, 2, 7, alphabet="xyz", seed=0, reverse=True)
    assert [s for s, _ in rev] == [s for s, _ in pairs]
    assert all(t == s[::-1] for s, t in rev)
    assert copy_task_pairs(5, seed=1) == copy_task_pairs(5, seed=1) != copy_task_pairs(5, seed=2)
    for kwargs in [dict(n=0), dict(n=3, min_len=0), dict(n=3, min_len=4, max_len=2),
                   dict(n=3, alphabet=""), dict(n=3, alphabet=["<eos>", "a"])]:
        with pytest.raises(ValueError):
            copy_task_pairs(**kwargs)


def _parse_human_date(s: str) -> tuple[dt.date | None, tuple[int, int, int] | None]:
    """Independent parser (strptime). Returns a date, or (day, month, yy) for 2-digit years."""
    s2 = re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", s)
    if re.fullmatch(r"\d\d/\d\d/\d\d", s2):
        d, m, y = map(int, s2.split("/"))
        return None, (d, m, y)
    for fmt in ["%d %B %Y", "%B %d, %Y", "%a %d %b %Y", "%Y.%m.%d", "%d %b %Y", "%A, %B %d, %Y",
                "%d.%m.%Y", "the %d of %B %Y", "%B %d %Y", "%d/%m/%Y", "%b %d %Y"]:
        try:
            return dt.datetime.strptime(s2, fmt).date(), None
        except ValueError:
            pass
    raise AssertionError(f"unparsable date {s!r}")


def test_date_pairs_are_correct_and_varied():
    pairs = date_pairs(400, seed=0)
    formats = set()
    for src, tgt in pairs:
        human, iso = "".join(src), "".join(tgt)
        assert src == list(human) and len(tgt) == 10
        date = dt.date.fromisoformat(iso)
        assert dt.date(1950, 1, 1) <= date <= dt.date(2049, 12, 31)
        parsed, short = _parse_human_date(human)
        if short is not None:
            assert short == (date.day, date.month, date.year % 100)
        else:
            assert parsed == date
        day_names = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        for name in day_names:
            if human.startswith(name[:3]):
                assert name == day_names[date.weekday()]
        formats.add(re.sub(r"[0-9]", "9", re.sub(r"[A-Za-z]+", "W", human)))
    assert len(formats) >= 8
    assert date_pairs(10, seed=4) == date_pairs(10, seed=4) != date_pairs(10, seed=5)
    with pytest.raises(ValueError):
        date_pairs(0)


# --------------------------------------------------------------------------- against D2L


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_fixed_length_batches_match_d2l_mtfraeng():
    """Same tokens as D2L's ``MTFraEng._build_arrays`` (min_freq=2, fixed num_steps).

    Two documented differences: after the target, D2L's decoder input holds ``<eos>``
    where ours holds ``<pad>`` (both lie outside the loss), and when a sentence is too long
    D2L cuts off its ``<eos>`` while we keep it. (No elisions here: D2L keeps "j'ai" whole.)
    """
    from course_lib.d2l_compat import import_d2l

    d2l = import_d2l()
    raw = ("Go.\tVa !\nHi.\tSalut.\nRun!\tCours\u202f!\nGo now.\tVa maintenant.\n"
           "Hi, Tom!\tSalut, Tom !\nI run.\tJe cours.\nI run now, Tom.\tJe cours maintenant, Tom.\n")
    num_steps = 6
    ref = object.__new__(d2l.MTFraEng)  # skip __init__, which downloads
    ref.num_steps, ref.num_train, ref.num_val = num_steps, 7, 0
    (r_src, r_tgt_in, r_src_valid, r_tgt_out), r_sv, r_tv = ref._build_arrays(raw)

    pairs = [tuple(line.split("\t")) for line in raw.strip().split("\n")]
    sv, tv = build_vocabs(pairs, min_freq=2)
    (batch,) = make_translation_loader(pairs, sv, tv, batch_size=7, max_len=num_steps, shuffle=False)

    def words(vocab_tokens, row):
        return [vocab_tokens[int(i)] for i in row]

    for b in range(7):
        ours_src = words(sv.tokens, batch.src[b])
        d2l_src = words(r_sv.idx_to_token, r_src[b])
        ours_in, ours_out = words(tv.tokens, batch.tgt_in[b]), words(tv.tokens, batch.tgt_out[b])
        d2l_in, d2l_out = words(r_tv.idx_to_token, r_tgt_in[b]), words(r_tv.idx_to_token, r_tgt_out[b])
        m = int(batch.tgt_valid_lens[b])
        if b < 6:  # fits in num_steps: identical
            assert ours_src == d2l_src and int(batch.src_valid_lens[b]) == int(r_src_valid[b])
            assert ours_out == d2l_out
            assert ours_in[:m] == d2l_in[:m]
            assert all(t == "<pad>" for t in ours_in[m:])
            assert all(t in ("<eos>", "<pad>") for t in d2l_in[m:])
        else:  # too long: D2L loses <eos>, we keep it
            assert "<eos>" not in d2l_src and ours_src[-1] == "<eos>"
            assert ours_src[:-1] == d2l_src[:-1]


def test_bucket_sampler_groups_lengths_covers_every_index_and_repeats_with_seed() -> None:
    from course_lib.data import BucketSampler

    lengths = [(i * 7919) % 23 + 1 for i in range(1000)]
    sampler = BucketSampler(lengths, batch_size=16, seed=3, pool=10)
    epoch = list(sampler)
    assert len(epoch) == len(sampler) == 63
    assert sorted(i for batch in epoch for i in batch) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in epoch) / len(epoch)
    assert spread < 3, f"bucketed batches should have similar lengths, mean spread {spread:.1f}"
    assert list(sampler) != epoch  # a new order every epoch
    assert list(BucketSampler(lengths, batch_size=16, seed=3, pool=10)) == epoch  # same seed, same batches
    with pytest.raises(ValueError, match="batch_size"):
        BucketSampler(lengths, batch_size=0)


def test_bucketed_loader_pads_less_and_keeps_every_pair() -> None:
    pairs = [(" ".join(["a"] * (1 + i % 15)), " ".join(["b"] * (1 + (i * 3) % 15))) for i in range(400)]
    src_vocab, tgt_vocab = build_vocabs(pairs)

    def pad_share(loader) -> tuple[float, int]:
        real = total = count = 0
        for batch in loader:
            real += int(batch.src_valid_lens.sum() + batch.tgt_valid_lens.sum())
            total += batch.src.numel() + batch.tgt_out.numel()
            count += batch.src.shape[0]
        return 1 - real / total, count

    plain, n_plain = pad_share(make_translation_loader(pairs, src_vocab, tgt_vocab, 32, seed=0))
    bucketed, n_bucketed = pad_share(make_translation_loader(pairs, src_vocab, tgt_vocab, 32, seed=0, bucket=True))
    assert n_plain == n_bucketed == 400
    assert bucketed < plain / 2
    with pytest.raises(ValueError, match="drop_last"):
        make_translation_loader(pairs, src_vocab, tgt_vocab, 32, bucket=True, drop_last=True)
