"""The real-data benchmark's own pieces that need no data file: the nn.Transformer baseline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from course_lib.decoding import greedy_decode
from benchmarks import bench_real_translation

TIER = "fast"  # course_tools/tiers.py

ROOT = Path(__file__).resolve().parents[1]


def _load_bench():
    return bench_real_translation


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_torch_baseline_decodes_step_by_step_as_it_trains():
    """decode_step gives the logits teacher forcing gives at the same position, padding is
    ignored, and greedy decoding through course_lib.decoding works on it."""
    bench = _load_bench()
    run = bench.RUNS["torch-recipe"]
    assert run.model == "torch-transformer" and run.tokens == "bpe" and run.beam > 1  # the whole recipe
    torch.manual_seed(0)
    model = bench.torch_transformer(11, 13, bench.replace(run, d_model=16, d_ff=32, num_heads=2), max_len=12).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    lens = torch.tensor([4, 3])
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 3, 3]])
    with torch.no_grad():
        full = model(src, lens, tgt_in)  # (B, L, V)
        state = model.encode(src, lens)
        for t in range(tgt_in.shape[1]):
            logits, state = model.decode_step(tgt_in[:, t], state)
            torch.testing.assert_close(logits, full[:, t], rtol=1e-4, atol=1e-5)
        # the padded position of row 1 does not matter
        other = model(torch.tensor([[5, 6, 7, 2], [8, 9, 2, 10]]), lens, tgt_in)
        torch.testing.assert_close(other[1], full[1], rtol=1e-4, atol=1e-5)
        reordered = model.reorder_state(state, torch.tensor([1, 1]))
        assert torch.equal(reordered[2][0], state[2][1])
    out = greedy_decode(model, src, lens, bos_id=1, eos_id=2, max_len=6)
    assert len(out) == 2 and all(len(seq) <= 6 for seq in out)


def test_xavier_run_reinitialises_only_the_init():
    """recipe-xavier is the recipe with the tutorial's initialisation: same settings otherwise,
    every matrix re-drawn Xavier-uniform (embeddings far from the library's std 1/sqrt(E))."""
    from course_lib.transformer import TransformerConfig

    bench = _load_bench()
    assert bench.replace(bench.RUNS["recipe-xavier"], init="library") == bench.RUNS["recipe"]
    cfg = TransformerConfig(2000, 2000, d_model=128, num_heads=4, d_ff=256, num_layers=2)
    torch.manual_seed(0)
    library = bench.course_transformer(cfg, bench.RUNS["recipe"])
    torch.manual_seed(0)
    xavier = bench.course_transformer(cfg, bench.RUNS["recipe-xavier"])
    lib_emb = next(p for n, p in library.named_parameters() if "embedding" in n and p.dim() == 2)
    xav_emb = next(p for n, p in xavier.named_parameters() if "embedding" in n and p.dim() == 2)
    assert abs(lib_emb.std().item() - 128 ** -0.5) < 0.01
    bound = (6 / sum(xav_emb.shape)) ** 0.5  # Xavier-uniform's bound for this matrix
    assert xav_emb.abs().max().item() <= bound and abs(xav_emb.std().item() - bound / 3 ** 0.5) < 0.005
    with pytest.raises(ValueError, match="init must be"):
        bench.course_transformer(cfg, bench.replace(bench.RUNS["recipe"], init="kaiming"))


def test_leave_one_out_runs_remove_exactly_one_ingredient():
    """Each recipe-<x> run differs from the recipe in the settings of that ingredient only,
    and takes the plain Transformer's value there."""
    from dataclasses import asdict

    bench = _load_bench()
    recipe, plain = asdict(bench.RUNS["recipe"]), asdict(bench.RUNS["transformer"])
    fields = {"bpe": {"tokens"}, "bucket": {"bucket"}, "warmup": {"schedule", "lr"},
              "smooth": {"label_smoothing"}, "shape": {"d_model", "d_ff"}}
    for name, changed in fields.items():
        run = asdict(bench.RUNS[f"recipe-{name}"])
        differ = {k for k in run if run[k] != recipe[k]}
        shape_same_ff = {"d_ff"} if recipe["d_ff"] == plain["d_ff"] else set()
        assert differ == changed - shape_same_ff, (name, differ)
        assert all(run[k] == plain[k] for k in changed), name
