"""Tests for course_lib.scoring against PyTorch's SDPA (float64), d2l, and worked examples."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.masking import causal_may_attend, valid_lens_to_may_attend
from course_lib.scoring import (AdditiveAttention, DotProductAttention, MultiplicativeAttention,
                                scaled_dot_product_attention)

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64


@pytest.fixture(scope="module")
def d2l():
    from course_lib.d2l_compat import import_d2l

    return import_d2l()


def _qkv(*lead: int, q: int = 4, k: int = 6, d: int = 8, dv: int = 5, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*lead, q, d, dtype=F64, generator=gen),
            torch.randn(*lead, k, d, dtype=F64, generator=gen),
            torch.randn(*lead, k, dv, dtype=F64, generator=gen))


def _random_keep(*shape: int, seed: int = 1) -> torch.Tensor:
    """A random keep mask with at least one True per row (so PyTorch's SDPA gives no NaN)."""
    keep = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    keep[..., 0] = True
    return keep


# ---------------------------------------------------------------- functional SDPA vs PyTorch

@pytest.mark.parametrize("lead", [(), (3,), (2, 3)])
def test_sdpa_matches_pytorch_and_weights_by_hand(lead):
    q, k, v = _qkv(*lead)
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    torch.testing.assert_close(weights, by_hand)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*lead, 4, dtype=F64))


def test_sdpa_bool_mask_means_may_attend():
    q, k, v = _qkv(2, 3)
    keep = _random_keep(2, 1, 4, 6)  # broadcast over heads
    out, weights = scaled_dot_product_attention(q, k, v, may_attend=keep)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    assert torch.all(weights.masked_select(~keep.expand_as(weights)) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, dtype=F64))


def test_sdpa_float_mask_is_added():
    q, k, v = _qkv(2)
    additive = torch.randn(4, 6, dtype=F64)
    additive[1, 2:] = float("-inf")
    out, weights = scaled_dot_product_attention(q, k, v, attn_bias=additive)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))
    by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + additive, dim=-1)
    torch.testing.assert_close(weights, by_hand)


def test_sdpa_is_causal_and_scale():
    q, k, v = _qkv(2, 3, q=5, k=5)
    out, weights = scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3))
    assert torch.all(weights.triu(diagonal=1) == 0)
    # is_causal combines with a boolean mask
    keep = _random_keep(5, 5)
    out, _ = scaled_dot_product_attention(q, k, v, may_attend=keep, is_causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal_may_attend(5)))


def test_sdpa_is_causal_with_more_keys_than_queries_is_bottom_right_aligned():
    # the queries are the last Q positions (cached decoding); PyTorch's is_causal would align
    # top-left instead, so compare against the explicit mask
    q, k, v = _qkv(2, q=2, k=5)
    out, weights = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_may_attend(2, 5)))
    assert torch.all(weights[:, 0, 4] == 0) and torch.all(weights[:, 1] > 0)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "bool+causal", "float+causal"])
def test_fast_path_equals_slow_path(mask_kind):
    q, k, v = _qkv(2, 3, q=6, k=6)
    may_attend = bias = None
    if mask_kind.startswith("bool"):
        may_attend = _random_keep(2, 1, 6, 6)
    elif mask_kind.startswith("float"):
        bias = torch.randn(6, 6, dtype=F64).masked_fill(~_random_keep(6, 6), float("-inf"))
    causal = mask_kind.endswith("causal")
    slow, weights = scaled_dot_product_attention(q, k, v, may_attend, is_causal=causal, attn_bias=bias)
    fast, none = scaled_dot_product_attention(q, k, v, may_attend, is_causal=causal, attn_bias=bias,
                                              need_weights=False)
    assert none is None and weights is not None
    torch.testing.assert_close(fast, slow)


@pytest.mark.parametrize("kind", ["bool", "float", "float+bool-causal"])
def test_fully_masked_rows_give_zero_on_both_paths(kind):
    q, k, v = _qkv(2, q=3, k=4)
    keep = torch.ones(3, 4, dtype=torch.bool)
    keep[1] = False  # query 1 may attend to nothing
    masks = {"may_attend": keep}
    if kind != "bool":
        masks = {"attn_bias": torch.zeros(3, 4, dtype=F64).masked_fill(~keep, float("-inf"))}
    causal = kind.endswith("causal")
    slow, weights = scaled_dot_product_attention(q, k, v, is_causal=causal, **masks)
    fast, _ = scaled_dot_product_attention(q, k, v, is_causal=causal, need_weights=False, **masks)
    assert torch.equal(weights[:, 1], torch.zeros(2, 4, dtype=F64))
    assert torch.equal(slow[:, 1], torch.zeros(2, 5, dtype=F64))
    assert torch.isfinite(fast).all()
    torch.testing.assert_close(fast, slow)
    # the other rows are as PyTorch computes them
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal_may_attend(3, 4) if causal else keep)
    torch.testing.assert_close(slow[:, [0, 2]], ref[:, [0, 2]])


def test_padding_invariance():
    q, k, v = _qkv(3)
    keep = valid_lens_to_may_attend(torch.tensor([2, 6, 4]), 4, 6)
    out, weights = scaled_dot_product_attention(q, k, v, may_attend=keep)
    k2, v2 = k.clone(), v.clone()
    pad = ~keep[:, 0]  # (B, K) padded keys
    k2[pad] = torch.randn(int(pad.sum()), 8, dtype=F64) * 50
    v2[pad] = torch.randn(int(pad.sum()), 5, dtype=F64) * 50
    out2, weights2 = scaled_dot_product_attention(q, k2, v2, may_attend=keep)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(weights2, weights)
    fast, _ = scaled_dot_product_attention(q, k2, v2, may_attend=keep, need_weights=False)
    torch.testing.assert_close(fast, out)


def test_sdpa_gradcheck():
    q, k, v = (t.requires_grad_() for t in _qkv(2, q=3, k=4, d=3, dv=2))
    keep = _random_keep(2, 3, 4)
    keep[1, 2] = False  # one fully masked row: its zero output must have a zero gradient
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, may_attend=keep)[0],
                                    (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, is_causal=True,
                                                                                 need_weights=False)[0],
                                    (q, k, v))


def test_sdpa_gradients_match_pytorch():
    q, k, v = _qkv(2, 2)
    keep = _random_keep(2, 1, 4, 6)
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    grad_out = torch.randn(2, 2, 4, 5, dtype=F64)
    scaled_dot_product_attention(*ours, may_attend=keep)[0].backward(grad_out)
    F.scaled_dot_product_attention(*ref, attn_mask=keep).backward(grad_out)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a.grad, b.grad)


def test_sdpa_dropout_returns_weights_before_dropout():
    q, k, v = _qkv(2)
    _, plain = scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    out, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(weights, plain)
    assert not torch.allclose(out, scaled_dot_product_attention(q, k, v)[0])


@pytest.mark.parametrize("shapes, message", [
    (((4, 8), (6, 7), (6, 5)), "same last size D"),
    (((4, 8), (6, 8), (5, 5)), "same number of positions K"),
    (((8,), (6, 8), (6, 5)), "at least 2 dimensions"),
])
def test_sdpa_errors(shapes, message):
    q, k, v = (torch.randn(*s) for s in shapes)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


# ---------------------------------------------------------------- D2L-style modules

@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
@pytest.mark.parametrize("valid_lens", [None, torch.tensor([2, 6, 3]), torch.tensor([[1, 2, 3, 4]] * 3)])
def test_dot_product_attention_vs_d2l_and_pytorch(d2l, valid_lens):
    q, k, v = _qkv(3)
    ours = DotProductAttention(dropout=0.0).eval()
    theirs = d2l.DotProductAttention(dropout=0.0).eval()
    out = ours(q, k, v, valid_lens)
    torch.testing.assert_close(out, theirs(q, k, v, valid_lens))
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)
    keep = None if valid_lens is None else valid_lens_to_may_attend(valid_lens, 4, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


def test_dot_product_attention_errors():
    with pytest.raises(ValueError, match=r"\(B, Q, D\)"):
        DotProductAttention()(*_qkv(2, 3))


def _copied_additive(d2l, key_size: int, query_size: int, hidden: int):
    theirs = d2l.AdditiveAttention(hidden, dropout=0.0).double().eval()
    q, k, v = torch.randn(1, 1, query_size, dtype=F64), torch.randn(1, 2, key_size, dtype=F64), torch.randn(1, 2, 3, dtype=F64)
    theirs(q, k, v, None)  # materialize the LazyLinear layers
    ours = AdditiveAttention(key_size, query_size, hidden).double().eval()
    with torch.no_grad():
        for name in ("W_q", "W_k", "w_v"):
            getattr(ours, name).weight.copy_(getattr(theirs, name).weight)
    return ours, theirs


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
@pytest.mark.parametrize("valid_lens", [None, torch.tensor([2, 5]), torch.tensor([[1, 5, 3], [4, 2, 2]])])
def test_additive_attention_vs_d2l(d2l, valid_lens):
    ours, theirs = _copied_additive(d2l, key_size=3, query_size=7, hidden=6)
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 7, dtype=F64, generator=gen), torch.randn(2, 5, 3, dtype=F64, generator=gen),
               torch.randn(2, 5, 4, dtype=F64, generator=gen))
    out = ours(q, k, v, valid_lens)
    torch.testing.assert_close(out, theirs(q, k, v, valid_lens))
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights)
    # by hand: w_v^T tanh(W_q q + W_k k)
    scores = torch.tanh((q @ ours.W_q.weight.T)[:, :, None, :] + (k @ ours.W_k.weight.T)[:, None, :, :])
    scores = (scores @ ours.w_v.weight.T).squeeze(-1)
    if valid_lens is not None:
        scores = scores.masked_fill(~valid_lens_to_may_attend(valid_lens, 3, 5), float("-inf"))
    torch.testing.assert_close(ours.attention_weights, torch.softmax(scores, -1))


@pytest.mark.parametrize("make", [lambda: AdditiveAttention(key_size=2, query_size=3, num_hiddens=4),
                                  lambda: MultiplicativeAttention(key_size=2, query_size=3)],
                         ids=["additive", "multiplicative"])
def test_scoring_module_gradcheck_and_errors(make):
    att = make().double()
    q, k, v = (torch.randn(2, 2, 3, dtype=F64, requires_grad=True), torch.randn(2, 4, 2, dtype=F64, requires_grad=True),
               torch.randn(2, 4, 2, dtype=F64, requires_grad=True))
    lens = torch.tensor([2, 4])
    assert torch.autograd.gradcheck(lambda a, b, c: att(a, b, c, lens), (q, k, v))
    with pytest.raises(ValueError, match="expected query size 3 and key size 2"):
        att(torch.randn(2, 2, 5), torch.randn(2, 4, 2), torch.randn(2, 4, 2))
    with pytest.raises(ValueError, match="must agree on B and K"):
        att(torch.randn(2, 2, 3), torch.randn(2, 4, 2), torch.randn(2, 3, 2))
    with pytest.raises(ValueError, match=r"queries \(B, Q, query_size\)"):
        att(torch.randn(2, 3), torch.randn(2, 4, 2), torch.randn(2, 4, 2))


def test_additive_attention_is_uniform_over_equal_valid_keys():
    # queries of size 20, ten keys of size 2 that are all equal, valid lengths [2, 6]:
    # equal keys give equal scores, so the weights are exactly uniform over the valid keys
    torch.manual_seed(0)
    queries, keys = torch.normal(0, 1, (2, 1, 20)), torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    att = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8).eval()
    out = att(queries, keys, values, torch.tensor([2, 6]))
    weights = att.attention_weights
    assert torch.equal(weights[0, 0, :2], torch.full((2,), 0.5))
    assert torch.equal(weights[0, 0, 2:], torch.zeros(8))
    torch.testing.assert_close(weights[1, 0, :6], torch.full((6,), 1 / 6), rtol=0, atol=1e-7)
    assert torch.equal(weights[1, 0, 6:], torch.zeros(4))
    # the output is the mean of the valid values
    torch.testing.assert_close(out[:, 0], torch.stack([values[0, :2].mean(0), values[1, :6].mean(0)]))


@pytest.mark.parametrize("valid_lens", [None, torch.tensor([2, 5]), torch.tensor([[1, 5, 3], [4, 2, 2]])])
def test_multiplicative_attention_is_q_w_k_by_an_explicit_loop(valid_lens):
    gen = torch.Generator().manual_seed(7)
    att = MultiplicativeAttention(key_size=3, query_size=7).double().eval()
    assert [(n, tuple(p.shape)) for n, p in att.named_parameters()] == [("W_a.weight", (7, 3))]
    q, k, v = (torch.randn(2, 3, 7, dtype=F64, generator=gen), torch.randn(2, 5, 3, dtype=F64, generator=gen),
               torch.randn(2, 5, 4, dtype=F64, generator=gen))
    out = att(q, k, v, valid_lens)
    W = att.W_a.weight                                              # (query_size, key_size)
    lens = torch.full((2, 3), 5) if valid_lens is None else valid_lens.reshape(2, -1).expand(2, 3)
    expected = torch.zeros(2, 3, 4, dtype=F64)
    for b in range(2):
        for i in range(3):
            n = int(lens[b, i])
            scores = torch.stack([q[b, i] @ W @ k[b, j] for j in range(n)])
            weights = torch.softmax(scores, 0)
            torch.testing.assert_close(att.attention_weights[b, i, :n], weights)
            assert torch.equal(att.attention_weights[b, i, n:], torch.zeros(5 - n, dtype=F64))
            expected[b, i] = sum(weights[j] * v[b, j] for j in range(n))
    torch.testing.assert_close(out, expected)


def test_multiplicative_attention_with_identity_is_dot_product_attention():
    q, k, v = _qkv(3, d=8)
    lens = torch.tensor([2, 6, 3])
    att = MultiplicativeAttention(key_size=8, query_size=8).double().eval()
    with torch.no_grad():
        att.W_a.weight.copy_(torch.eye(8))                          # W = I: the plain dot product q.k
    out = att(q, k, v, lens)
    keep = valid_lens_to_may_attend(lens, 4, 6)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=1.0))
    with torch.no_grad():
        att.W_a.weight.copy_(torch.eye(8) / math.sqrt(8))           # W = I / sqrt(d): scaled dot-product
    dot = DotProductAttention().eval()
    torch.testing.assert_close(att(q, k, v, lens), dot(q, k, v, lens))
    torch.testing.assert_close(att.attention_weights, dot.attention_weights)


def test_multiplicative_attention_is_scaled_dot_product_of_projections():
    # softmax((q W_q)(k W_k)^T / sqrt(D)): the score q^T W k with W = W_q W_k^T / sqrt(D), of rank <= D
    gen = torch.Generator().manual_seed(8)
    W_q, W_k = torch.randn(6, 2, dtype=F64, generator=gen), torch.randn(4, 2, dtype=F64, generator=gen)
    q, k, v = (torch.randn(2, 3, 6, dtype=F64, generator=gen), torch.randn(2, 5, 4, dtype=F64, generator=gen),
               torch.randn(2, 5, 3, dtype=F64, generator=gen))
    att = MultiplicativeAttention(key_size=4, query_size=6).double()
    with torch.no_grad():
        att.W_a.weight.copy_(W_q @ W_k.T / math.sqrt(2))
    assert torch.linalg.matrix_rank(att.W_a.weight) == 2
    torch.testing.assert_close(att(q, k, v), F.scaled_dot_product_attention(q @ W_q, k @ W_k, v))


def test_scaled_dot_product_worked_example():
    # a worked example by hand: X (2, 3), W_Q and W_K (3, 2), checked number by number
    X = torch.tensor([[1.0, 0, 1], [0, 1, 1]], dtype=F64)
    W_Q = torch.tensor([[1.0, 0], [0, 1], [1, 0]], dtype=F64)
    W_K = torch.tensor([[0.0, 1], [1, 0], [0, 1]], dtype=F64)
    W_V = torch.tensor([[1.0, 1], [0, 1], [1, 0]], dtype=F64)
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    assert torch.equal(Q, torch.tensor([[2.0, 0], [1, 1]], dtype=F64))
    assert torch.equal(K, torch.tensor([[0.0, 2], [1, 1]], dtype=F64))
    assert torch.equal(V, torch.tensor([[2.0, 1], [1, 1]], dtype=F64))
    assert torch.equal(Q @ K.T, torch.tensor([[0.0, 2], [2, 2]], dtype=F64))
    out, weights = scaled_dot_product_attention(Q, K, V)  # scale 1/sqrt(d_k), d_k = 2
    torch.testing.assert_close(weights, torch.tensor([[0.1956, 0.8044], [0.5, 0.5]], dtype=F64),
                               rtol=0, atol=5e-5)
    torch.testing.assert_close(out, torch.tensor([[1.1956, 1.0], [1.5, 1.0]], dtype=F64), rtol=0, atol=5e-5)
    # the seed's scale sqrt(3) (the input size) gives other numbers
    _, wrong = scaled_dot_product_attention(Q, K, V, scale=1 / math.sqrt(3))
    assert not torch.allclose(wrong, weights, atol=1e-2)


# ---------------------------------------------------------------- typical mistakes differ

def _no_sqrt(q, k, v, keep):
    scores = (q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, -1) @ v


def _softmax_over_queries(q, k, v, keep):
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, -2)) @ v


def _mask_after_softmax(q, k, v, keep):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) * keep
    return weights @ v


@pytest.mark.parametrize("mistake", [_no_sqrt, _softmax_over_queries, _mask_after_softmax])
def test_typical_mistakes_give_different_outputs(mistake):
    q, k, v = _qkv(2, d=64)
    keep = valid_lens_to_may_attend(torch.tensor([3, 5]), 4, 6)
    ours, _ = scaled_dot_product_attention(q, k, v, may_attend=keep)
    assert not torch.allclose(mistake(q, k, v, keep), ours, atol=1e-3)
    # while a correct re-implementation agrees
    scores = (q @ k.transpose(-2, -1) / 8).masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(torch.softmax(scores, -1) @ v, ours)


def test_attention_calls_make_no_host_synchronisation(monkeypatch):
    # On a GPU, reading a tensor's value on the host (bool(), .item(), .tolist()) waits for the
    # device. No attention call of the library does it, with any mask or is_causal.
    from course_lib.multihead import MultiHeadAttention

    def refuse(self, *args, **kwargs):
        raise AssertionError("host synchronisation inside an attention call")

    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 4, 8, dtype=F64)
    padding = torch.tensor([[False] * 4, [True] * 4])  # the second row has no key at all
    for name in ("__bool__", "item", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    for training in (False, True):
        mha.train(training)
        for need_weights in (False, True):
            out, _ = mha(x, x, x, real_keys=~padding, need_weights=need_weights)
            mha(x, x, x, is_causal=True, need_weights=need_weights)
    monkeypatch.undo()
    assert torch.equal(out[1], mha.out_proj.bias.expand(4, 8))  # no key: zero attention output


def test_is_causal_reaches_pytorch_when_queries_and_keys_align(monkeypatch):
    # aligned queries and keys: is_causal goes to F.scaled_dot_product_attention itself (no mask
    # tensor), so PyTorch can choose a causal kernel; a cached step of several queries gets the
    # offset mask; a single cached query needs none
    import course_lib.scoring as scoring
    from course_lib.scoring import scaled_dot_product_attention as attend

    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs.get("attn_mask"), kwargs.get("is_causal")))
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring.F, "scaled_dot_product_attention", spy)
    q4, k4, v4 = _qkv(2, q=4, k=4)
    q2, k6, v6 = _qkv(2, q=2, k=6)
    attend(q4, k4, v4, is_causal=True, need_weights=False)
    attend(q2, k6, v6, is_causal=True, need_weights=False)
    attend(q2[..., :1, :], k6, v6, is_causal=True, need_weights=False)
    assert calls[0] == (None, True)
    assert calls[1][1] is False and torch.equal(calls[1][0], causal_may_attend(2, 6))  # keep mask, offset 4
    assert calls[2] == (None, False)
    monkeypatch.undo()
    for q, k, v in ((q4, k4, v4), (q2, k6, v6)):  # the fused calls equal the written-out formula
        fused, _ = attend(q, k, v, is_causal=True, need_weights=False)
        written, weights = attend(q, k, v, is_causal=True)
        torch.testing.assert_close(fused, written, rtol=0, atol=1e-12)
        assert torch.all(weights.masked_select(~causal_may_attend(q.shape[-2], k.shape[-2])) == 0)
