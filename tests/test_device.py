"""The attention modules and models run on whatever device their parameters are on.

PyTorch's ``meta`` device holds shapes but no data: a forward pass there fails on a tensor
created on a fixed device (``cpu``) and mixed with the model's, and on any read of a value
on the host (``bool(t)``, ``t.item()``, ``t.tolist()``: a synchronisation on a GPU). So a
pass on ``meta`` shows the library would run on a GPU without per-call host syncs.
"""

from __future__ import annotations

import pytest
import torch

from course_lib.gpt import GPT, GPTConfig
from course_lib.gqa import GroupedQueryAttention
from course_lib.multihead import KVCache, MultiHeadAttention
from course_lib.transformer import TransformerDecoderBlock, TransformerEncoderBlock

TIER = "fast"  # course_tools/tiers.py

META = torch.device("meta")


@pytest.mark.slow  # 0.64 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_meta_tensors_refuse_host_reads_and_cpu_mixing() -> None:
    # what makes the test below meaningful
    t = torch.ones(2, device=META)
    with pytest.raises(RuntimeError):
        bool(t.any())
    with pytest.raises(RuntimeError):
        t + torch.ones(2)  # a CPU tensor mixed in


@pytest.mark.slow  # 0.19 s of CPU in its costliest case (a fast test stays under 0.1 s: course_tools/tiers.py)
@pytest.mark.parametrize("training", [False, True])
def test_models_run_on_the_meta_device(training: bool) -> None:
    x = torch.randn(2, 5, 8, device=META)
    real = torch.ones(2, 5, dtype=torch.bool, device=META)
    enc = TransformerEncoderBlock(8, 2, 16, dropout=0.1).to(META).train(training)
    assert enc(x, real).device == META
    dec = TransformerDecoderBlock(8, 2, 16, dropout=0.1).to(META).train(training)
    dec(x, x, real)
    cache, cross = KVCache(), KVCache()
    cross.update(0, *dec.cross_attention.project_key_value(x, x))
    dec.step(x[:, :2], cache, cross, memory_real_keys=real)  # two queries after none: is_causal
    dec.step(x[:, 2:4], cache, cross, memory_real_keys=real)  # two after two: the offset mask
    dec.step(x[:, 4:], cache, cross, memory_real_keys=real)  # one: no mask
    gpt = GPT(GPTConfig(50, n_embd=16, n_head=2)).to(META).train(training)
    idx = torch.zeros(2, 6, dtype=torch.long, device=META)
    cache = KVCache()
    gpt(idx[:, :3], cache=cache)
    gpt(idx[:, 3:], cache=cache)
    _, loss = gpt(idx, idx)
    assert loss is not None and loss.device == META
    y = torch.randn(2, 5, 16, device=META)
    gqa = GroupedQueryAttention(16, 4, 2, rotary=True).to(META).train(training)
    gqa(y, y, y, is_causal=True)
    gqa(y, y, y, real_keys=torch.ones(2, 5, dtype=torch.bool, device=META))
    mha = MultiHeadAttention(16, 4).to(META).train(training)
    mha(y, y, y, real_keys=torch.ones(2, 5, dtype=torch.bool, device=META))
    mha(y, y, y, is_causal=True)
