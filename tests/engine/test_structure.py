"""Names from module structure and joins (issue 21): convolution stems, class tokens, and a fused
width whose factoring a later use decides. Each case follows public code, cited."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import shapetrace


def _dims(t, op, which=0):
    return [e for e in t.events if e.op == op][which].output.dims


def test_a_patch_stem_names_the_grid_and_its_flattened_tokens():
    """timm's PatchEmbed (vision_transformer.py): ``proj(x).flatten(2).transpose(1, 2)``."""
    stem = nn.Conv2d(3, 24, kernel_size=4, stride=4)
    img = torch.randn(2, 3, 16, 12)
    with shapetrace.trace(dims="B=2 D=24 H=3") as t:
        x = stem(img)                                    # (B, D, Hp, Wp)
        x = x.flatten(2).transpose(1, 2)                 # (B, N, D)
    assert [e.output.shape for e in t.events] == [(2, 24, 4, 3), (2, 24, 12), (2, 12, 24)]
    assert [e.output.dims for e in t.events] == [("B", "D", "Hp", "Wp"), ("B", "D", "N"), ("B", "N", "D")]


def test_class_and_distillation_tokens_join_the_patches():
    """DeiT (facebookresearch/deit models.py, DistilledVisionTransformer): cls and dist tokens are
    expanded over the batch and joined in front of the patches: 2+N tokens."""
    stem = nn.Conv2d(3, 24, 4, 4)
    cls, dist = nn.Parameter(torch.zeros(1, 1, 24)), nn.Parameter(torch.zeros(1, 1, 24))
    img = torch.randn(2, 3, 8, 8)
    with shapetrace.trace(dims="B=2 D=24 H=3") as t:
        x = stem(img).flatten(2).transpose(1, 2)                                      # (B, N, D)
        x = torch.cat((cls.expand(2, -1, -1), dist.expand(2, -1, -1), x), dim=1)     # (B, 2+N, D)
    assert _dims(t, "cat") == ("B", "2+N", "D")


def test_channels_flattened_without_a_permute_are_a_mixed_axis():
    """A channel-first map read as tokens by a reshape without a permute (the bug reported in
    gupta-abhay/pytorch-vit#7, "flattening ends up mixing data from different channels"): channels
    mix with positions."""
    stem = nn.Conv2d(3, 24, 4, 4)
    img = torch.randn(2, 3, 16, 16)
    with shapetrace.trace(dims="B=2 D=24 H=3") as t:
        x = stem(img)                                    # (B, D, Hp, Wp)
        x.reshape(2, -1, 24)                             # (B, ?, ?): D mixed with the grid
    assert _dims(t, "reshape")[0] == "B"
    assert _dims(t, "reshape")[1].startswith("!")
    assert [d.severity for d in t.diagnostics if d.kind == "mixed-axis"] == ["error"]


def test_a_same_padded_conv_over_tokens_keeps_them():
    """A depthwise causal conv over tokens (Mamba / conformer style: [B, D, T] in, [B, D, T] out)."""
    conv = nn.Conv1d(32, 32, kernel_size=3, padding=1, groups=32)
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        conv(x.transpose(1, 2))                          # (B, D, T)
    assert _dims(t, "conv1d") == ("B", "D", "T")


def test_a_computed_filter_names_no_channels():
    img, weight = torch.randn(2, 3, 8, 8), torch.randn(24, 3, 4, 4)
    with shapetrace.trace(dims="B=2 D=24 H=3") as t:
        F.conv2d(img, weight, stride=4)                  # (B, ?, Hp, Wp)
    assert _dims(t, "conv2d") == ("B", None, "Hp", "Wp")


def test_timm_fused_qkv_at_three_heads_is_decided_by_unbind():
    """timm's Attention: ``qkv.reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4).unbind(0)`` at H = 3
    (vit_tiny: 192 wide, 3 heads): the axis unbound into q, k, v is the stack, the other the heads."""
    B, N, D, H = 2, 5, 24, 3
    qkv = nn.Linear(D, 3 * D)
    x = torch.randn(B, N, D)
    with shapetrace.trace(dims=f"B={B} T={N} D={D} H={H}") as t:
        parts = qkv(x).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)   # (qkv, B, H, T, d_k)
        q, k, v = parts.unbind(0)                                           # (B, H, T, d_k) each
    assert _dims(t, "reshape") == ("B", "T", "qkv", "H", "d_k")
    assert [o.dims for o in t.events[-1].outputs] == [("B", "H", "T", "d_k")] * 3


def test_in_place_metadata_ops_give_the_tensor_new_names_even_at_equal_sizes():
    """``q.transpose_(1, 2)`` at T == H: the shape does not change, the layout does (a new node)."""
    B, T, H, d = 2, 4, 4, 8
    x = torch.randn(B, T, H * d)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        q = x.view(B, T, H, d)                           # (B, T, H, d_k)
        q.transpose_(1, 2)                               # (B, H, T, d_k)
        q.unsqueeze_(0)                                  # (1, B, H, T, d_k)
    assert [(e.op, e.output.dims, e.output.stride) for e in t.events[1:]] == [
        ("transpose_", ("B", "H", "T", "d_k"), (128, 8, 32, 1)),
        ("unsqueeze_", (None, "B", "H", "T", "d_k"), (256, 128, 8, 32, 1))]
    assert all(e.view for e in t.events)


def test_complex_rope_pairs_features_and_comes_back_whole():
    """Llama's apply_rotary_emb (meta-llama/llama model.py): ``view_as_complex(x.reshape(..., -1, 2))``
    then ``view_as_real(...).flatten(3)``: the pairs are pieces of the head features, whole again
    after the round trip; every step is a view."""
    B, T, H, d = 2, 5, 3, 8
    x = torch.randn(B, T, H, d)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        xc = torch.view_as_complex(x.reshape(B, T, H, -1, 2))      # (B, T, H, d_k/2)
        out = torch.view_as_real(xc).flatten(3)                    # (B, T, H, d_k)
    ops = [e.op for e in t.events]
    assert ops == ["reshape", "view_as_complex", "view_as_real", "flatten"]
    assert t.events[1].output.shape == (B, T, H, d // 2) and t.events[1].output.dims[:3] == ("B", "T", "H")
    assert t.events[2].output.stride == (120, 24, 8, 2, 1)
    assert t.events[3].output.dims == ("B", "T", "H", "d_k") and out.shape == x.shape
    assert all(e.view for e in t.events)


def test_tiling_windows_split_the_axis_like_a_view_and_overlapping_ones_are_unnamed():
    """Local attention over blocks (lucidrains/local-attention style): ``x.unfold(1, w, w)`` tiles T;
    ``unfold(1, w, 1)`` slides (windows overlap) and names no window axis."""
    x = torch.randn(2, 6, 32)
    with shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        tiles = x.unfold(1, 3, 3)                        # (B, T/3 windows, D, 3 positions)
        slides = x.unfold(1, 3, 1)                       # (B, 4 windows, D, 3 positions)
    assert tiles.shape == t.events[0].output.shape == (2, 2, 32, 3)
    assert t.events[0].output.stride == tiles.stride() == (192, 96, 1, 32)
    assert t.events[0].output.dims[0] == "B" and t.events[0].output.dims[2] == "D"
    assert t.events[1].output.dims == ("B", None, "D", None) and t.events[1].output.stride == slides.stride()


def _legacy_cache_step(transpose_back: bool):
    """GPT-2's legacy tuple cache (huggingface/transformers#9727 asks about the transpose): the past
    key is stored [B, H, T, d_k]; joined with the new key laid out [B, H, d_k, 1] it must be
    transposed back first. T == d_k here, so the join runs either way."""
    B, H, T, d = 2, 3, 8, 8
    prompt = torch.randn(B, T, H * d)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        past = prompt.view(B, T, H, d).transpose(1, 2)              # (B, H, T, d_k): the cache
        new = prompt[:, -1:]                                        # (B, T[-1:], D): the step's token
        key = new.view(B, 1, H, d).permute(0, 2, 3, 1)              # (B, H, d_k, 1)
        stored = past.transpose(-2, -1) if transpose_back else past  # (B, H, d_k, T) or (B, H, T, d_k)
        torch.cat((stored, key), dim=-1)                            # (B, H, d_k, T+1)
    return t


def test_a_join_of_parts_laid_out_differently_is_an_error_naming_both():
    t = _legacy_cache_step(transpose_back=False)
    found = [d for d in t.diagnostics if d.kind == "join-mismatch"]
    assert [(d.severity, d.event) for d in found] == [("error", 5)]
    assert found[0].message.startswith("cat #5 joins [B=2, H=3, T=8, d_k=8] with [B=2, H=3, d_k=8, T[-1:]=1]: along "
                                       "axis -2 the first holds T and the second d_k.")


def test_the_same_join_with_the_past_key_transposed_back_is_clean():
    t = _legacy_cache_step(transpose_back=True)
    assert [d for d in t.diagnostics if d.severity == "error"] == []
    assert t.events[-1].output.dims == ("B", "H", "d_k", "T+1")


def test_a_static_cache_is_named_by_what_is_written_into_it():
    """transformers' StaticCache (``k_out[:, :, cache_position] = key_states``, or ``index_copy_``)
    and Meta's Llama (``self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk``): a buffer made by
    ``new_zeros`` takes the names of the keys written into it; the axis written in part along the
    keys' tokens holds positions (L), and reading the filled part back gives a slice of it."""
    B, T, H, d, MAX = 2, 5, 3, 8, 10
    x = torch.randn(B, T, H * d)
    with shapetrace.trace(dims=f"B={B} T={T} D={H * d} H={H}") as t:
        k = x.view(B, T, H, d).transpose(1, 2)          # (B, H, T, d_k)
        by_slice = k.new_zeros(B, H, MAX, d)             # (B, H, L, d_k)
        by_slice[:, :, 0:T] = k
        by_index = k.new_zeros(B, H, MAX, d)             # (B, H, L, d_k)
        by_index.index_copy_(2, torch.arange(T), k)
        q = k[:, :, -1:]                                 # (B, H, T[-1:], d_k)
        q @ by_slice[:, :, :T].transpose(-2, -1)         # (B, H, T[-1:], L[0:5])
        by_index[:, :, :T]                               # (B, H, L[0:5], d_k)
    reads = [e for e in t.events if e.op == "__getitem__"]
    assert [r.inputs[0].dims for r in reads[1:]] == [("B", "H", "L", "d_k")] * 2
    assert [r.output.dims for r in reads[1:]] == [("B", "H", "L[0:5]", "d_k")] * 2
    scores = next(e for e in t.events if e.op == "matmul")
    assert scores.output.dims == ("B", "H", "T[-1:]", "L[0:5]")


def test_an_unnamed_value_written_into_a_buffer_names_nothing():
    buf, value = torch.zeros(4, 7), torch.randn(4, 3)
    with shapetrace.trace(dims="B=2 T=5 D=24 H=3") as t:
        buf[:, 0:3] = value
        buf[:, :3].sum(dim=0)                            # (?, ?)
    assert all(d is None for e in t.events for o in e.outputs for d in o.dims)
