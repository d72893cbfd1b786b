"""Projections and caches written the way transformers writes them, not with ``F.linear``: Falcon's
``FalconLinear`` (an nn.Linear whose forward is ``input @ self.weight.T``) feeding its fused q/k/v
split per head, Falcon's grouped-query fused projection (new decoder architecture), and the first
write into a ``DynamicCache``, a ``torch.cat`` onto an empty 1-d tensor, and DeepSeek's latent
attention as transformers writes it: queries joined from a no-position part and a rotated part, keys
filled into a ``new_empty`` buffer slice by slice, eager or through SDPA (issue 21, corpus).

Sources: huggingface/transformers ``models/falcon/modeling_falcon.py`` (``FalconLinear``,
``FalconAttention._split_heads``) and ``cache_utils.py`` (``DynamicLayer.lazy_initialization`` sets
``self.keys = torch.tensor([])``; ``update`` does ``torch.cat([self.keys, key_states], dim=-2)``),
``models/deepseek_v3/modeling_deepseek_v3.py`` (``DeepseekV3Attention.forward``).
Written here from those shapes, not copied.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.helpers import Case, corpus_tests

DIMS = "B=2 T=5 D=24 H=3"            # T != H, d_k = 8
SQUARE = "B=2 T=4 D=32 H=4"          # T == H, d_k = 8
GQA = "B=2 T=5 D=32 H=4 H_kv=2"      # d_k = 8, (H + 2·H_kv)·d_k = 64 = 2·D


class MatmulLinear(nn.Linear):
    """nn.Linear computed as a product with the transposed weight (Falcon's FalconLinear)."""

    def forward(self, x):
        y = x @ self.weight.T                                         # (B, T, out)
        return y if self.bias is None else y + self.bias


class FalconFused(nn.Module):
    """One fused projection laid out per head (``[H, 3, d_k]``), split by indexing, eager attention."""

    def __init__(self, dim: int, heads: int, cache: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.cache = heads, dim // heads, cache
        self.query_key_value = MatmulLinear(dim, 3 * dim, bias=False)
        self.dense = MatmulLinear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        H, d = self.heads, self.head_dim
        fused = self.query_key_value(x).view(B, T, H, 3, d)            # (B, T, H, 3, d_k) [falcon-fused]
        q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]  # (B, T, H, d_k) each
        q = q.transpose(1, 2)                                         # (B, H, T, d_k) [falcon-q]
        k = k.transpose(1, 2)                                         # (B, H, T, d_k)
        v = v.transpose(1, 2)                                         # (B, H, T, d_k)
        if self.cache:
            keys, values = torch.tensor([]), torch.tensor([])         # an empty cache layer
            keys = torch.cat([keys, k], dim=-2)                       # (B, H, T, d_k) [cache-k]
            values = torch.cat([values, v], dim=-2)                   # (B, H, T, d_k) [cache-v]
            k, v = keys, values
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)               # (B, H, T, T) [falcon-scores]
        y = scores.softmax(dim=-1) @ v                                # (B, H, T, d_k) [falcon-y]
        y = y.permute(0, 2, 1, 3).reshape(B, T, D)                    # (B, T, D) [falcon-merge]
        return self.dense(y)


class FalconGrouped(nn.Module):
    """The grouped-query fused projection: per kv head, its n_rep query heads, then one key and one
    value head (``view(B, T, H_kv, n_rep + 2, d_k)``), broadcast and flattened back to H heads."""

    def __init__(self, dim: int, heads: int, kv_heads: int, linear: type = MatmulLinear):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.query_key_value = linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.dense = linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        groups, per_group = self.kv_heads, self.heads // self.kv_heads + 2
        qkv = self.query_key_value(x)                                 # (B, T, (H + 2·H_kv)·d_k)
        qkv = qkv.view(B, T, groups, per_group, self.head_dim)        # (B, T, H_kv, n_rep+2, d_k)
        q = qkv[:, :, :, :-2]                                         # (B, T, H_kv, n_rep, d_k)
        k = torch.broadcast_to(qkv[:, :, :, [-2]], q.shape)           # (B, T, H_kv, n_rep, d_k)
        v = torch.broadcast_to(qkv[:, :, :, [-1]], q.shape)           # (B, T, H_kv, n_rep, d_k)
        q, k, v = (t.flatten(2, 3).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d_k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)   # (B, H, T, T)
        y = scores.softmax(dim=-1) @ v                                # (B, H, T, d_k)
        return self.dense(y.transpose(1, 2).reshape(B, T, D))         # (B, T, D)


class LatentAttention(nn.Module):
    """DeepSeek-V3-style MLA: low-rank queries split per head into ``nope`` and ``rope`` parts, keys
    and values from a compressed latent, one shared rotary key for all heads; the keys are written
    into a fresh buffer in two slices, the queries joined back with ``cat``."""

    def __init__(self, dim: int, heads: int, fused: bool = False, nope: int = 4, rope: int = 4, v_dim: int = 6,
                 q_rank: int = 10, kv_rank: int = 7):
        super().__init__()
        self.heads, self.nope, self.rope, self.v_dim, self.fused = heads, nope, rope, v_dim, fused
        self.q_a_proj = nn.Linear(dim, q_rank, bias=False)
        self.q_b_proj = nn.Linear(q_rank, heads * (nope + rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(dim, kv_rank + rope, bias=False)
        self.kv_b_proj = nn.Linear(kv_rank, heads * (nope + v_dim), bias=False)
        self.o_proj = nn.Linear(heads * v_dim, dim, bias=False)

    def rotate(self, x):
        x1, x2 = x[..., 0::2], x[..., 1::2]                           # (..., rope/2) each
        return torch.cat([x1 - x2, x2 + x1], dim=-1)                  # (..., rope)

    def forward(self, x):
        B, T, D = x.shape
        H, nope, rope = self.heads, self.nope, self.rope
        q = self.q_b_proj(self.q_a_proj(x)).view(B, T, H, nope + rope).transpose(1, 2)  # (B, H, T, nope+rope) [mla-q]
        q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)         # (B, H, T, nope), (B, H, T, rope)
        latent, k_rot = torch.split(self.kv_a_proj_with_mqa(x), [self.kv_b_proj.in_features, rope], dim=-1)
        k_rot = k_rot.view(B, 1, T, rope)                             # (B, 1, T, rope)
        kv = self.kv_b_proj(latent).view(B, T, H, nope + self.v_dim).transpose(1, 2)  # (B, H, T, nope+v)
        k_pass, value = torch.split(kv, [nope, self.v_dim], dim=-1)  # (B, H, T, nope), (B, H, T, v)
        q_rot, k_rot = self.rotate(q_rot), self.rotate(k_rot)
        k_rot = k_rot.expand(-1, H, -1, -1)                           # (B, H, T, rope)
        query = torch.cat((q_pass, q_rot), dim=-1)                    # (B, H, T, nope+rope) [mla-query]
        key = k_pass.new_empty(B, H, T, nope + rope)                  # (B, H, T, nope+rope)
        key[..., :nope].copy_(k_pass)                                 # (B, H, T, nope) [mla-key-pass]
        key[..., nope:].copy_(k_rot)                                  # (B, H, T, rope)
        if self.fused:
            y = F.scaled_dot_product_attention(query, key, value)     # (B, H, T, v) [mla-y]
        else:
            w = (query @ key.transpose(2, 3) / math.sqrt(nope + rope)).softmax(dim=-1)  # (B, H, T, T) [mla-w]
            y = w @ value                                             # (B, H, T, v) [mla-y]
        return self.o_proj(y.transpose(1, 2).reshape(B, T, H * self.v_dim))  # (B, T, D)


class FusedGroupedSlices(nn.Module):
    """Phi-3's ``qkv_proj``: one projection of width (H + 2·H_kv)·d_k, queries first, cut by slicing
    (``split=True``: by ``split`` into the queries and the keys-and-values, GPTBigCode's ``c_attn``)."""

    def __init__(self, dim: int, heads: int, kv_heads: int, split: bool = False):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.split = heads, kv_heads, dim // heads, split
        self.qkv_proj = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        H, H_kv, d = self.heads, self.kv_heads, self.head_dim
        qkv = self.qkv_proj(x)                                        # (B, T, D + 2·D_kv) [gqa-fused]
        if self.split:
            q, kv = qkv.split((H * d, 2 * H_kv * d), dim=-1)          # (B, T, D), (B, T, 2·D_kv)
            k, v = kv.chunk(2, dim=-1)                                # (B, T, D_kv) each
        else:
            q = qkv[..., :H * d]                                      # (B, T, D) [gqa-q-part]
            k = qkv[..., H * d:(H + H_kv) * d]                        # (B, T, D_kv) [gqa-k-part]
            v = qkv[..., (H + H_kv) * d:]                             # (B, T, D_kv)
        q = q.view(B, T, H, d).transpose(1, 2)                        # (B, H, T, d_k) [gqa-q]
        k = k.view(B, T, H_kv, d).transpose(1, 2)                     # (B, H_kv, T, d_k) [gqa-k]
        v = v.view(B, T, H_kv, d).transpose(1, 2)                     # (B, H_kv, T, d_k)
        k = k.repeat_interleave(H // H_kv, dim=1)                     # (B, H, T, d_k)
        v = v.repeat_interleave(H // H_kv, dim=1)                     # (B, H, T, d_k)
        w = (q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(dim=-1)  # (B, H, T, T) [gqa-w]
        return self.o_proj((w @ v).transpose(1, 2).reshape(B, T, D))  # (B, T, D)


class PatchMerging(nn.Module):
    """Swin's downsampling between stages: each 2×2 block of patches becomes one patch with the four
    patches' features side by side, then a linear 4·D -> 2·D. ``style``: ``timm`` (reshape, permute,
    flatten), ``hf`` (transformers: four strided slices joined by ``cat``), ``no-permute`` (a view
    straight to [B, Hp/2, Wp/2, 4·D]: rows of two blocks mixed, the bug)."""

    def __init__(self, dim: int, style: str = "timm"):
        super().__init__()
        self.style = style
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        B, H, W, C = x.shape                                          # (B, Hp, Wp, D)
        if self.style == "timm":
            x = x.reshape(B, H // 2, 2, W // 2, 2, C)                 # (B, Hp/2, 2, Wp/2, 2, D)
            x = x.permute(0, 1, 3, 4, 2, 5).flatten(3)                # (B, Hp/2, Wp/2, 4·D) [merge]
        elif self.style == "hf":
            parts = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]  # 4 x (B, Hp/2, Wp/2, D)
            x = torch.cat(parts, dim=-1)                              # (B, Hp/2, Wp/2, 4·D)
        else:
            x = x.view(B, H // 2, W // 2, 4 * C)                      # (B, Hp/2, Wp/2, 4·D)?? [bug-merge]
        return self.reduction(self.norm(x))                           # (B, Hp/2, Wp/2, 2·D) [merge-out]


def build(model_class, B: int = 2, T: int = 5, D: int = 24, **kwargs):
    def make():
        return model_class(**kwargs).eval(), (torch.randn(B, T, D),)
    return make


def build_grid(style: str):
    def make():
        return PatchMerging(24, style).eval(), (torch.randn(2, 4, 6, 24),)
    return make


GRID = "B=2 D=24 H=3 Hp=4 Wp=6"      # a 4 x 6 grid of patches
PER_HEAD = ("B", "H", "T", "d_k")
FALCON_HEADS = {"falcon-fused": ("B", "T", "H", "qkv", "d_k"), "falcon-q": PER_HEAD,
                "falcon-scores": ("B", "H", "T", "T"), "falcon-y": PER_HEAD, "falcon-merge": ("B", "T", "D")}

CASES = [
    Case("falcon-linear-as-matmul-fused-per-head", DIMS, build(FalconFused, dim=24, heads=3),
         heads=FALCON_HEADS, silent=("falcon-fused", "falcon-q", "falcon-scores")),
    Case("falcon-linear-as-matmul-fused-per-head-T-eq-H", SQUARE, build(FalconFused, T=4, D=32, dim=32, heads=4),
         heads=FALCON_HEADS, silent=("falcon-fused", "falcon-q", "falcon-scores")),
    Case("dynamic-cache-first-write-cats-onto-an-empty-tensor", DIMS, build(FalconFused, dim=24, heads=3, cache=True),
         heads={**FALCON_HEADS, "cache-k": PER_HEAD, "cache-v": PER_HEAD}, silent=("cache-k", "cache-v")),
    Case("phi3-fused-grouped-qkv-cut-by-slices", GQA, build(FusedGroupedSlices, D=32, dim=32, heads=4, kv_heads=2),
         heads={"gqa-fused": ("B", "T", "D+2*D_kv"), "gqa-q-part": ("B", "T", "D"), "gqa-k-part": ("B", "T", "D_kv"),
                "gqa-q": PER_HEAD, "gqa-k": ("B", "H_kv", "T", "d_k"), "gqa-w": ("B", "H", "T", "T")},
         silent=("gqa-fused", "gqa-q", "gqa-k", "gqa-w")),
    Case("bigcode-fused-grouped-qkv-split", GQA,
         build(FusedGroupedSlices, D=32, dim=32, heads=4, kv_heads=2, split=True),
         heads={"gqa-q": PER_HEAD, "gqa-k": ("B", "H_kv", "T", "d_k"), "gqa-w": ("B", "H", "T", "T")}),
    Case("timm-swin-patch-merging", GRID, build_grid("timm"), names=("B Hp Wp D",),
         heads={"merge": ("B", "?", "?", "?")}, silent=("merge", "merge-out")),
    Case("hf-swin-patch-merging-by-slices", GRID, build_grid("hf"), names=("B Hp Wp D",), silent=("merge-out",)),
    Case("swin-patch-merging-view-without-permute", GRID, build_grid("no-permute"), names=("B Hp Wp D",),
         bug=("bug-merge",)),
    Case("deepseek-mla-joined-queries-keys-filled-by-slices", DIMS, build(LatentAttention, dim=24, heads=3),
         heads={"mla-q": ("B", "H", "T", "?"), "mla-query": ("B", "H", "T", "?"), "mla-key-pass": ("B", "H", "T", "?"),
                "mla-w": ("B", "H", "T", "T"), "mla-y": ("B", "H", "T", "?")},
         silent=("mla-query", "mla-key-pass", "mla-w")),
    Case("deepseek-mla-joined-queries-through-sdpa", DIMS, build(LatentAttention, dim=24, heads=3, fused=True),
         heads={"mla-q": ("B", "H", "T", "?"), "mla-query": ("B", "H", "T", "?"), "mla-y": ("B", "H", "T", "?")},
         silent=("mla-query", "mla-y")),
    Case("deepseek-mla-joined-queries-T-eq-H", SQUARE, build(LatentAttention, T=4, D=32, dim=32, heads=4),
         heads={"mla-q": ("B", "H", "T", "?"), "mla-query": ("B", "H", "T", "?"), "mla-w": ("B", "H", "T", "T")}),
]


test_names, test_verdict = corpus_tests(__name__, CASES)


@pytest.mark.parametrize("linear", [MatmulLinear, nn.Linear], ids=["falcon-linear", "nn-linear"])
def test_a_grouped_fused_projection_names_no_axis_heads(linear):
    """At H = 2·H_kv the grouped width (H + 2·H_kv)·d_k equals 2·D: read as ``kv·D = (2, H, d_k)`` the
    view would call the axis of each group's n_rep + 2 parts ``H`` (it has H's size, 4). With H_kv
    declared, nothing on that view is named H, and the correct code gets no error. (Without H_kv the
    width is read as k and v side by side, ``kv·D``, as most code lays it out.)"""
    dims = "B=2 T=5 D=32 H=4 H_kv=2"
    torch.manual_seed(0)
    model, x = FalconGrouped(32, 4, 2, linear).eval(), torch.randn(2, 5, 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    views = [e for e in t.events if e.op == "view" and len(e.output.shape) == 5]
    assert [tuple(e.output.shape) for e in views] == [(2, 5, 2, 4, 8)]
    assert views[0].output.dims[:2] == ("B", "T")
    # the groups and each group's slots are named by the grouped factoring (H_kv, n_rep + 2, d_k) of the
    # fused width (round 9: Falcon-40B's new_decoder_architecture), never ``H``
    assert views[0].output.dims == ("B", "T", "H_kv", "n_rep+2", "d_k")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
