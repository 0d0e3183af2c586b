"""Tests for course_lib.multihead against nn.MultiheadAttention and d2l (float64, copied weights)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_lib.masking import causal_may_attend, valid_lens_to_may_attend, valid_lens_to_real_keys
from course_lib.multihead import MultiHeadAttention, merge_heads, split_heads

TIER = "fast"  # course_tools/tiers.py

F64 = torch.float64
B, L, S, E, H = 3, 4, 5, 8, 2


@pytest.fixture(scope="module")
def d2l():
    from course_lib.d2l_compat import import_d2l

    return import_d2l()


def _torch_pair(*, kdim=None, vdim=None, bias=True, batch_first=True, dropout=0.0, seed=0):
    """A float64 nn.MultiheadAttention with random weights and biases, and our copy of it."""
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(E, H, dropout=dropout, bias=bias, kdim=kdim, vdim=vdim,
                                batch_first=batch_first, dtype=F64)
    with torch.no_grad():
        for p in ref.parameters():  # PyTorch initializes biases to zero; make them count
            p.normal_(0, 0.5)
    return ref, MultiHeadAttention.from_torch(ref)


def _inputs(kdim=E, vdim=E, batch_first=True, tgt=L, src=S, seed=1):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, tgt, E, dtype=F64, generator=gen)
    k = torch.randn(B, src, kdim, dtype=F64, generator=gen)
    v = torch.randn(B, src, vdim, dtype=F64, generator=gen)
    if not batch_first:
        q, k, v = (t.transpose(0, 1).contiguous() for t in (q, k, v))  # (T, B, E)
    return q, k, v


def _masks(kpm_kind, mask_kind, tgt, src, seed=2):
    gen = torch.Generator().manual_seed(seed)
    kpm = attn_mask = None
    if kpm_kind:
        padded = ~valid_lens_to_real_keys(torch.tensor([src, 2, 3]), src)  # (B, S), True = padding
        kpm = padded if kpm_kind == "bool" else \
            torch.randn(B, src, dtype=F64, generator=gen).masked_fill(padded, float("-inf"))
    if mask_kind:
        dims, kind = mask_kind.split("-")
        shape = (tgt, src) if dims == "2d" else (B * H, tgt, src)
        blocked = torch.rand(*shape, generator=gen) > 0.6
        blocked[..., 0] = False  # every query keeps key 0, so no row is fully masked
        attn_mask = blocked if kind == "bool" else \
            torch.randn(*shape, dtype=F64, generator=gen).masked_fill(blocked, float("-inf"))
    return kpm, attn_mask


def _ours_masks(kpm, attn_mask):
    """PyTorch's key_padding_mask / attn_mask (True = masked out, or float added) as
    MultiHeadAttention's real_keys / may_attend (True = may attend) / attn_bias (float)."""
    kwargs, biases = {}, []
    if kpm is not None:
        if kpm.dtype == torch.bool:
            kwargs["real_keys"] = ~kpm
        else:
            biases.append(kpm[:, None, None, :])  # (B, 1, 1, S)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            kwargs["may_attend"] = ~attn_mask
        else:
            biases.append(attn_mask if attn_mask.dim() == 2 else attn_mask.reshape(B, H, *attn_mask.shape[1:]))
    if biases:
        kwargs["attn_bias"] = sum(biases[1:], biases[0])
    return kwargs


def _grads_by_name(ours: MultiHeadAttention, ref: nn.MultiheadAttention):
    """Pairs (our gradient, PyTorch's gradient) for every parameter."""
    if ref._qkv_same_embed_dim:
        ref_w = ref.in_proj_weight.grad.chunk(3)
    else:
        ref_w = (ref.q_proj_weight.grad, ref.k_proj_weight.grad, ref.v_proj_weight.grad)
    pairs = list(zip((ours.q_proj.weight.grad, ours.k_proj.weight.grad, ours.v_proj.weight.grad), ref_w))
    pairs.append((ours.out_proj.weight.grad, ref.out_proj.weight.grad))
    if ref.in_proj_bias is not None:
        pairs += zip((ours.q_proj.bias.grad, ours.k_proj.bias.grad, ours.v_proj.bias.grad), ref.in_proj_bias.grad.chunk(3))
        pairs.append((ours.out_proj.bias.grad, ref.out_proj.bias.grad))
    return pairs


CASES = {
    "plain": {},
    "seq_first": {"batch_first": False},
    "kdim_vdim": {"kdim": 6, "vdim": 3},
    "no_bias": {"bias": False},
    "kpm_bool": {"kpm": "bool"},
    "kpm_float": {"kpm": "float"},
    "mask_2d_bool": {"mask": "2d-bool"},
    "mask_2d_float": {"mask": "2d-float"},
    "mask_3d_bool": {"mask": "3d-bool"},
    "mask_3d_float": {"mask": "3d-float"},
    "kpm_and_mask_bool": {"kpm": "bool", "mask": "2d-bool"},
    "kpm_and_mask_float": {"kpm": "float", "mask": "3d-float"},
    "causal": {"causal": True},
    "causal_kpm_seq_first": {"causal": True, "kpm": "bool", "batch_first": False},
    "everything": {"kpm": "bool", "mask": "3d-bool", "kdim": 6, "vdim": 3, "batch_first": False, "bias": False},
    # query is key is value: both modules take their packed (one GEMM) projection path
    "self_attention": {"self": True, "kpm": "bool"},
    "self_attention_seq_first_causal": {"self": True, "causal": True, "batch_first": False},
    "self_attention_no_bias_float_mask": {"self": True, "bias": False, "mask": "2d-float"},
}
WEIGHT_MODES = {"avg": (True, True), "per_head": (True, False), "no_weights": (False, True)}


@pytest.mark.parametrize("mode", list(WEIGHT_MODES))
@pytest.mark.parametrize("case", list(CASES))
def test_from_torch_parity_values_and_gradients(case, mode):
    cfg = CASES[case]
    need_weights, average = WEIGHT_MODES[mode]
    batch_first = cfg.get("batch_first", True)
    kdim, vdim = cfg.get("kdim", E), cfg.get("vdim", E)
    src = L if cfg.get("causal") or cfg.get("self") else S
    ref, ours = _torch_pair(kdim=cfg.get("kdim"), vdim=cfg.get("vdim"), bias=cfg.get("bias", True),
                            batch_first=batch_first)
    kpm, attn_mask = _masks(cfg.get("kpm"), cfg.get("mask"), L, src)
    ref_mask = attn_mask
    if cfg.get("causal"):  # PyTorch's module treats is_causal as a hint and needs the mask too
        ref_mask = ~causal_may_attend(L)

    inputs = _inputs(kdim, vdim, batch_first, L, src)
    if cfg.get("self"):
        x, x_ref = inputs[0].clone().requires_grad_(), inputs[0].clone().requires_grad_()
        ours_in, ref_in = [x, x, x], [x_ref, x_ref, x_ref]
    else:
        ours_in = [t.clone().requires_grad_() for t in inputs]
        ref_in = [t.clone().requires_grad_() for t in inputs]
    out, weights = ours(*ours_in, need_weights=need_weights, average_attn_weights=average,
                        is_causal=cfg.get("causal", False), **_ours_masks(kpm, attn_mask))
    ref_out, ref_weights = ref(*ref_in, key_padding_mask=kpm, need_weights=need_weights, attn_mask=ref_mask,
                               average_attn_weights=average, is_causal=cfg.get("causal", False))
    torch.testing.assert_close(out, ref_out)
    if need_weights:
        assert weights.shape == ((B, L, src) if average else (B, H, L, src))
        torch.testing.assert_close(weights, ref_weights)
    else:
        assert weights is None and ref_weights is None

    gen = torch.Generator().manual_seed(5)
    grad_out = torch.randn(out.shape, dtype=F64, generator=gen)
    loss, ref_loss = (out * grad_out).sum(), (ref_out * grad_out).sum()
    if need_weights:  # the weights' backward pass is checked too
        grad_w = torch.randn(weights.shape, dtype=F64, generator=gen)
        loss, ref_loss = loss + (weights * grad_w).sum(), ref_loss + (ref_weights * grad_w).sum()
    loss.backward()
    ref_loss.backward()
    for a, b in zip(ours_in, ref_in):
        torch.testing.assert_close(a.grad, b.grad)
    for a, b in _grads_by_name(ours, ref):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_packed_path_equals_separate_projections(bias):
    _, ours = _torch_pair(bias=bias)
    x = _inputs(src=L)[0]
    hook_calls = []
    ours.k_proj.register_forward_hook(lambda *args: hook_calls.append(1))
    packed, packed_w = ours(x, x, x, average_attn_weights=False)
    assert hook_calls == []  # the packed path ran (one GEMM, not the k_proj module)
    separate, separate_w = ours(x, x.clone(), x.clone(), average_attn_weights=False)
    assert hook_calls == [1]
    torch.testing.assert_close(packed, separate)
    torch.testing.assert_close(packed_w, separate_w)


def test_is_causal_combines_with_may_attend():
    ref, ours = _torch_pair()
    q, k, v = _inputs(src=L)
    _, blocked = _masks(None, "2d-bool", L, L)
    out, _ = ours(q, k, v, may_attend=~blocked, is_causal=True)
    ref_out, _ = ref(q, k, v, attn_mask=blocked | ~causal_may_attend(L))
    torch.testing.assert_close(out, ref_out)


def test_from_torch_rejects_bias_kv():
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(E, H, add_bias_kv=True))


def test_from_torch_keeps_training_mode_and_dtype():
    ref = nn.MultiheadAttention(E, H, dropout=0.1).eval()
    ours = MultiHeadAttention.from_torch(ref)
    assert not ours.training and ours.dropout_p == 0.1 and ours.batch_first is False
    assert MultiHeadAttention.from_torch(ref.double()).q_proj.weight.dtype == F64


# ---------------------------------------------------------------- d2l parity

def _d2l_pair(d2l):
    torch.manual_seed(0)
    theirs = d2l.MultiHeadAttention(E, H, dropout=0.0, bias=False)
    x = torch.zeros(1, 2, E)
    theirs(x, x, x, None)  # materialize the LazyLinear layers
    theirs = theirs.double().eval()
    ours = MultiHeadAttention(E, H, bias=False, dtype=F64).eval()
    with torch.no_grad():
        for mine, name in ((ours.q_proj, "W_q"), (ours.k_proj, "W_k"), (ours.v_proj, "W_v"), (ours.out_proj, "W_o")):
            mine.weight.copy_(getattr(theirs, name).weight)
    return ours, theirs


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_parity_with_d2l_valid_lens(d2l):
    ours, theirs = _d2l_pair(d2l)
    q, k, v = _inputs()
    valid_lens = torch.tensor([5, 2, 3])
    ref = theirs(q, k, v, valid_lens)
    out, _ = ours(q, k, v, real_keys=valid_lens_to_real_keys(valid_lens, S))
    torch.testing.assert_close(out, ref)
    # D2L's attention weights are (B*H, L, S) with batch element b, head h at row b*H + h
    torch.testing.assert_close(ours.attention_weights.reshape(B * H, L, S), theirs.attention.attention_weights)
    out, _ = ours(q, k, v)
    torch.testing.assert_close(out, theirs(q, k, v, None))


@pytest.mark.slow  # a parity test against d2l: importing d2l (pandas, its plotting) costs about 0.6 s of CPU
def test_parity_with_d2l_per_query_valid_lens(d2l):
    ours, theirs = _d2l_pair(d2l)
    q, k, v = _inputs()
    valid_lens = torch.tensor([[1, 2, 3, 4], [5, 5, 1, 2], [3, 3, 3, 3]])  # (B, L)
    allowed = valid_lens_to_may_attend(valid_lens, L, S).repeat_interleave(H, dim=0)  # (B*H, L, S)
    out, _ = ours(q, k, v, may_attend=allowed)
    torch.testing.assert_close(out, theirs(q, k, v, valid_lens))


# ---------------------------------------------------------------- heads

def test_split_and_merge_heads():
    x = torch.arange(2 * 3 * 12, dtype=torch.float32).reshape(2, 3, 12)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 3)
    for h in range(4):  # head h holds features h*D ... (h+1)*D - 1
        assert torch.equal(heads[:, h], x[..., h * 3:(h + 1) * 3])
    assert torch.equal(merge_heads(heads), x)
    y = torch.randn(2, 4, 5, 3)
    assert torch.equal(split_heads(merge_heads(y), 4), y)
    with pytest.raises(ValueError, match="E=12 must be divisible by num_heads=5"):
        split_heads(x, 5)


def test_heads_are_independent_attentions():
    # head h of the output = attention in the h-th D-dimensional slice of the projections
    ours = MultiHeadAttention(E, H, dtype=F64)
    q, k, v = _inputs()
    ours(q, k, v, average_attn_weights=False)
    D = E // H
    qp, kp = ours.q_proj(q), ours.k_proj(k)
    for h in range(H):
        scores = qp[..., h * D:(h + 1) * D] @ kp[..., h * D:(h + 1) * D].transpose(1, 2) / D ** 0.5
        torch.testing.assert_close(ours.attention_weights[:, h], torch.softmax(scores, -1))


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_parameter_count(heads):
    ours = MultiHeadAttention(E, heads)
    assert sum(p.numel() for p in ours.parameters()) == 4 * E ** 2 + 4 * E
    assert sum(p.numel() for p in MultiHeadAttention(E, heads, bias=False).parameters()) == 4 * E ** 2
    ref = nn.MultiheadAttention(E, heads)
    assert sum(p.numel() for p in ref.parameters()) == 4 * E ** 2 + 4 * E
    mixed = MultiHeadAttention(E, heads, kdim=6, vdim=3)
    assert sum(p.numel() for p in mixed.parameters()) == \
        sum(p.numel() for p in nn.MultiheadAttention(E, heads, kdim=6, vdim=3).parameters())


# ---------------------------------------------------------------- properties

def test_padding_invariance():
    ours = MultiHeadAttention(E, H, dtype=F64).eval()
    q, k, v = _inputs()
    real = valid_lens_to_real_keys(torch.tensor([5, 2, 3]), S)
    kpm = ~real  # the padded keys
    out, weights = ours(q, k, v, real_keys=real)
    k2, v2 = k.clone(), v.clone()
    k2[kpm] = 100 * torch.randn(int(kpm.sum()), E, dtype=F64)
    v2[kpm] = 100 * torch.randn(int(kpm.sum()), E, dtype=F64)
    out2, weights2 = ours(q, k2, v2, real_keys=real)
    torch.testing.assert_close(out2, out)
    torch.testing.assert_close(weights2, weights)
    assert torch.all(weights.masked_select(kpm[:, None, :].expand_as(weights)) == 0)
    out3, _ = ours(q, k2, v2, real_keys=real, need_weights=False)
    torch.testing.assert_close(out3, out)


def test_fully_masked_query_outputs_the_output_bias():
    ours = MultiHeadAttention(E, H, dtype=F64)
    q, k, v = _inputs()
    allowed = torch.ones(L, S, dtype=torch.bool)
    allowed[2] = False  # query 2 may attend to nothing
    for need_weights in (True, False):
        out, _ = ours(q, k, v, may_attend=allowed, need_weights=need_weights)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[:, 2], ours.out_proj.bias.expand(B, E))


def test_dropout_only_in_training():
    torch.manual_seed(0)
    ours = MultiHeadAttention(E, H, dropout=0.5, dtype=F64)
    plain = MultiHeadAttention(E, H, dropout=0.0, dtype=F64)
    plain.load_state_dict(ours.state_dict())
    q, k, v = _inputs()
    ours.eval()
    torch.testing.assert_close(ours(q, k, v)[0], plain(q, k, v)[0])
    torch.testing.assert_close(ours(q, k, v, need_weights=False)[0], plain(q, k, v)[0])
    ours.train()
    a, _ = ours(q, k, v)
    b, _ = ours(q, k, v, need_weights=False)
    assert not torch.allclose(a, plain(q, k, v)[0])
    assert not torch.allclose(b, plain(q, k, v)[0])


def test_attention_weights_recorded_per_head():
    ours = MultiHeadAttention(E, H, dtype=F64)
    q, k, v = (t.requires_grad_() for t in _inputs())
    _, averaged = ours(q, k, v)
    recorded = ours.attention_weights
    assert recorded.shape == (B, H, L, S) and not recorded.requires_grad
    torch.testing.assert_close(recorded.mean(dim=1), averaged.detach())
    torch.testing.assert_close(recorded.sum(-1), torch.ones(B, H, L, dtype=F64))


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("args, message", [
    ((10, 3), "embed_dim=10 must be divisible by num_heads=3"),
    ((0, 1), "must be positive"),
])
def test_constructor_errors(args, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(*args)


@pytest.mark.parametrize("shapes, message", [
    (((B, L, E + 1), (B, S, E), (B, S, E)), r"query must have shape \(B, L, E=8\)"),
    (((B, L, E), (B, S, 6), (B, S, E)), r"key must be \(B, S, 8\)"),
    (((B, L, E), (B, S, E), (B, S + 1, E)), "must share B"),
    (((B + 1, L, E), (B, S, E), (B, S, E)), "must share B"),
    (((L, E), (S, E), (S, E)), "must be 3-D"),
])
def test_input_shape_errors(shapes, message):
    ours = MultiHeadAttention(E, H)
    with pytest.raises(ValueError, match=message):
        ours(*(torch.randn(*s) for s in shapes))


@pytest.mark.parametrize("kwargs, message", [
    ({"real_keys": torch.ones(B, S + 1, dtype=torch.bool)}, r"real_keys must be a boolean \(B, S\)=\(3, 5\)"),
    ({"may_attend": torch.ones(S, L, dtype=torch.bool)}, r"2-D may_attend must have shape \(L, S\)=\(4, 5\)"),
    ({"may_attend": torch.ones(B, L, S, dtype=torch.bool)}, r"\(L, S\), \(B\*H, L, S\) or broadcastable"),
    ({"attn_bias": torch.zeros(2, 1, L, S)}, r"attn_bias must be \(L, S\), \(B\*H, L, S\) or broadcastable"),
])
def test_mask_shape_errors(kwargs, message):
    ours = MultiHeadAttention(E, H)
    q, k, v = torch.randn(B, L, E), torch.randn(B, S, E), torch.randn(B, S, E)
    with pytest.raises(ValueError, match=message):
        ours(q, k, v, **kwargs)
