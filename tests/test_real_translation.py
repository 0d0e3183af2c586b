"""The real-data path end to end, on a small slice of the real Tatoeba file.

Runs only where the file is available (``$COURSE_FRA_ENG``, or ``../shared/data/fra-eng.zip``
next to the project); learners without the download see a skip with the reason. Kept
small (about 2,000 pairs, a few dozen training steps) so it takes seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from course_lib.bpe import BPE
from course_lib.data import build_vocabs, make_translation_loader
from course_lib.decoding import translate
from course_lib.fra_eng import (
    FRA_TXT_SHA1,
    download_fra_eng,
    near_duplicate_key,
    normalize_source,
    read_fra_eng,
    sha1_of,
    split_pairs,
    verify_fra_eng,
)
from course_lib.training import seq2seq_loss, set_seed
from course_lib.transformer import Transformer, TransformerConfig
from benchmarks import bench_real_translation

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("COURSE_FRA_ENG") or ROOT.parent / "shared" / "data" / "fra-eng.zip")

pytestmark = pytest.mark.skipif(
    not DATA.exists(),
    reason=f"the real fra-eng data is not at {DATA}: set COURSE_FRA_ENG to fra-eng.zip or fra.txt "
    "(course_lib.fra_eng.download_fra_eng() fetches it) to run the real-data test",
)


@pytest.fixture(scope="module")
def fra_txt(tmp_path_factory) -> Path:
    """The file through the learner's path: download (from a file:// URL), verify, extract."""
    cache = tmp_path_factory.mktemp("cache")
    return download_fra_eng(cache, url=DATA.resolve().as_uri())


@pytest.mark.slow  # 0.38 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_the_real_file_is_accepted_by_content_and_parsed(fra_txt):
    assert sha1_of(fra_txt) == FRA_TXT_SHA1  # the extracted text is D2L's, whatever the zip
    verify_fra_eng(DATA)  # D2L's zip, or (like the shared copy) a re-packed one of the same text
    pairs = read_fra_eng(fra_txt)
    assert len(pairs) == 167_130
    assert pairs[0] == ("Go.", "Va !")  # the narrow no-break space became a space


@pytest.mark.slow  # trains and scores a translation model (about 2 s of CPU): the slow tier, not fast
def test_train_translate_and_score_a_small_slice(fra_txt):
    sacrebleu = pytest.importorskip("sacrebleu")
    pairs = read_fra_eng(fra_txt, max_pairs=2000)
    splits = split_pairs(pairs, n_valid=0, n_test=200, seed=0)
    assert (len(splits.train), len(splits.test)) == (1800, 200)
    test_src = {normalize_source(en) for en, _ in splits.test}
    assert not test_src & {normalize_source(en) for en, _ in splits.train}

    src_bpe = BPE.train([en for en, _ in splits.train], 300)
    tgt_bpe = BPE.train([fr for _, fr in splits.train], 300)
    token_pairs = [(src_bpe(en), tgt_bpe(fr)) for en, fr in splits.train]
    src_vocab, tgt_vocab = build_vocabs(token_pairs)
    set_seed(0)
    loader = make_translation_loader(token_pairs, src_vocab, tgt_vocab, 64, fixed_length=False, bucket=True)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=32, num_heads=2,
                                          d_ff=64, num_layers=1, dropout=0.0, max_len=24))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(2):
        for batch in loader:
            loss = seq2seq_loss(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.0  # it learns something

    sources = sorted({en for en, _ in splits.test})
    with pytest.warns(UserWarning, match="max_len=100 exceeds"):
        out = translate(model, sources, src_vocab, tgt_vocab, src_bpe, max_len=100, detokenize=tgt_bpe.decode)
    assert len(out) == len(sources) and all(isinstance(t, str) for t in out)
    assert not any("</w>" in t or " '" in t or "' " in t.replace("' '", "") for t in out)  # readable
    refs = [[fr for en, fr in splits.test if en == s][0] for s in sources]
    score = sacrebleu.corpus_bleu(out, [refs], lowercase=True).score
    assert 0.0 <= score <= 100.0


def _load_bench():
    return bench_real_translation


@pytest.mark.slow  # 0.27 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_the_benchmark_splits_keep_near_duplicates_on_one_side():
    bench = _load_bench()
    args = bench.parse_args(["--data", str(DATA), "--lines", "3000", "--n-valid", "200", "--n-test", "200"])
    train, valid, test, desc = bench.load_data(args)
    assert (len(train), len(valid), len(test)) == (2600, 200, 200)
    keys = [{near_duplicate_key(en) for en, _ in part} for part in (train, valid, test)]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    # the split does not move with --seed (only the model's initialisation and data order do)
    assert bench.load_data(bench.parse_args(["--data", str(DATA), "--lines", "3000", "--n-valid",
                                             "200", "--n-test", "200", "--seed", "5"]))[2] == test


@pytest.mark.slow  # a whole benchmark worker: BPE, training, scoring: the slow tier, not fast
def test_the_benchmark_worker_runs_on_the_real_file():
    bench = _load_bench()
    args = bench.parse_args(["--data", str(DATA), "--lines", "1500", "--n-valid", "100", "--n-test", "100",
                             "--max-steps", "5", "--cpu-seconds", "30"])
    threads = torch.get_num_threads()
    try:
        result = bench.run_worker("tf+bpe", args)
    finally:
        torch.set_num_threads(threads)
    assert result["steps"] == 5 and result["test_sources"] <= 100
    assert "1300 training pairs, 100 validation pairs" in result["data"] and "100 test pairs" in result["data"]
    assert set(result["scores"]) == {"valid", "test"} and set(result["scores"]["test"]) == {"greedy"}
    for key in ("sacrebleu", "sacrebleu_multi", "own_token_bleu", "d2l_bleu_k2", "peak_rss_mb", "params"):
        assert result[key] >= 0
    assert result["sacrebleu_signature"].startswith("nrefs:1|")
    assert result["examples"] and all(isinstance(e["hyp"], str) for e in result["examples"])
