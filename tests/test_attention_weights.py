"""The one rule for recorded attention weights, checked on every attention module of course_lib.

``attention_weights`` holds the last forward pass's weights as one detached tensor (None when
that pass did not form them); ``last_attention_weights`` of a decoding model is one detached
tensor whose first axis is the batch (course_lib.multihead.HeadsAttention states the rule).
"""

from __future__ import annotations

import torch
from torch import Tensor

from course_lib.gpt import GPT, GPTConfig
from course_lib.gqa import GroupedQueryAttention
from course_lib.multihead import MultiHeadAttention
from course_lib.pooling import NadarayaWatsonRegression
from course_lib.scoring import AdditiveAttention, DotProductAttention, MultiplicativeAttention
from course_lib.seq2seq import AttentionSeq2Seq, Seq2SeqConfig
from course_lib.transformer import Transformer, TransformerConfig

TIER = "fast"  # course_tools/tiers.py


def _assert_recorded(weights: object, shape: tuple[int, ...], who: str) -> None:
    assert isinstance(weights, Tensor), f"{who}: attention weights must be one tensor, got {type(weights).__name__}"
    assert tuple(weights.shape) == shape, f"{who}: shape {tuple(weights.shape)}, expected {shape}"
    assert not weights.requires_grad and weights.grad_fn is None, f"{who}: recorded weights must be detached"


def test_scoring_modules_record_detached_weights() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    lens = torch.tensor([5, 2])
    for module in (DotProductAttention(), AdditiveAttention(4, 4, 8), MultiplicativeAttention(4, 4)):
        out = module(q, k, v, lens)
        _assert_recorded(module.attention_weights, (2, 3, 5), type(module).__name__)
        assert out.requires_grad  # the output still carries the gradient through the weights
        out.sum().backward()
        assert q.grad is not None and q.grad.abs().sum() > 0
        q.grad = None


def test_nadaraya_watson_records_detached_weights_and_still_learns_its_width() -> None:
    model = NadarayaWatsonRegression(init_width=0.5)
    x = torch.linspace(0, 3, 7)
    out = model(x, x, torch.sin(x), may_attend=~torch.eye(7, dtype=torch.bool))
    _assert_recorded(model.attention_weights, (7, 7), "NadarayaWatsonRegression")
    out.sum().backward()
    assert model.log_width.grad is not None and model.log_width.grad != 0


def test_multihead_modules_record_detached_weights_in_evaluation_and_none_in_training() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    for module in (MultiHeadAttention(16, 4), GroupedQueryAttention(16, 4, 2)):
        module.eval()
        if isinstance(module, MultiHeadAttention):
            module(x, x, x, need_weights=True)
        else:
            module(x, x, x, is_causal=True)
        _assert_recorded(module.attention_weights, (2, 4, 5, 5), type(module).__name__)
    gqa = GroupedQueryAttention(16, 4, 2).train()
    gqa(x, x, x, is_causal=True)
    assert gqa.attention_weights is None  # training takes the fused kernel: no weights formed


def test_gpt_attention_follows_the_same_rule_through_the_shared_path() -> None:
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=2, n_head=2, n_embd=16))
    idx = torch.randint(20, (3, 6))
    gpt.eval()
    gpt(idx)
    maps = gpt.attention_maps()
    assert len(maps) == 2
    for layer, weights in enumerate(maps):
        _assert_recorded(weights, (3, 2, 6, 6), f"GPT layer {layer}")
        assert torch.all(weights.triu(diagonal=1) == 0)  # causal
    gpt.train()
    gpt(idx)
    assert gpt.attention_maps() == []


def test_seq2seq_and_transformer_decoding_weights_are_one_detached_tensor() -> None:
    torch.manual_seed(0)
    src = torch.randint(4, 12, (3, 5))
    valid = torch.tensor([5, 3, 2])
    tgt = torch.randint(4, 12, (3, 4))
    bahdanau = AttentionSeq2Seq(Seq2SeqConfig(12, 12, embed_size=8, num_hiddens=16, num_layers=1)).eval()
    bahdanau(src, valid, tgt)
    _assert_recorded(bahdanau.attention_weights, (3, 4, 5), "AttentionSeq2Seq.attention_weights")
    _assert_recorded(bahdanau.decoder.attention.attention_weights, (3, 1, 5), "AdditiveAttention in the decoder")
    transformer = Transformer(TransformerConfig(12, 12, d_model=16, num_heads=4, d_ff=32, num_layers=2,
                                                max_len=16)).eval()
    for model, shape in ((bahdanau, (3, 5)), (transformer, (3, 2, 4, 5))):
        state = model.encode(src, valid)
        _, state = model.decode_step(torch.full((3,), 1), state)
        _assert_recorded(model.last_attention_weights, shape, f"{type(model).__name__}.last_attention_weights")
