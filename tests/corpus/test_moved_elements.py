"""Names of axes whose elements were moved, selected or shortened (issue 33, item 2, corpus): Swin's
shifted windows (``torch.roll``), PVT/SegFormer's keys shortened by a strided conv, transformers' GPT-2
causal mask sliced from a registered buffer by sizes read from q and k, MAE's ``gather(ids_keep)``, a
head-major ``cat(split(...))`` fold and einops' ``(b h)`` fold after a class token is spliced in. Each
at distinct sizes and at equal ones (B = T = H = 4): equal sizes never decide a name."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

import shapetrace
from shapetrace.engine.sentences import annotate, brief
from tests.corpus.helpers import Case, corpus_tests, tagged_event, trace_case

# -- Swin's shifted windows ------------------------------------------------------------------------


def window_partition(x, ws: int):
    """microsoft/Swin-Transformer models/swin_transformer.py ``window_partition``."""
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C)                        # (B, H/ws, ws, W/ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)  # (B*nW, ws, ws, C) [sw-windows]


def window_reverse(windows, ws: int, H: int, W: int):
    """microsoft/Swin-Transformer ``window_reverse``."""
    B = int(windows.shape[0] / (H * W / ws / ws))
    x = windows.view(B, H // ws, W // ws, ws, ws, -1)                 # (B, H/ws, W/ws, ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)  # (B, H, W, C)


class ShiftedWindowBlock(nn.Module):
    """microsoft/Swin-Transformer ``SwinTransformerBlock`` with ``shift_size > 0``: the attention mask
    built from ``img_mask`` slices, ``torch.roll(x, shifts=(-s, -s), dims=(1, 2))`` before
    ``window_partition`` and ``+s`` after ``window_reverse``, ``WindowAttention`` with the mask added per
    window (``attn.view(B_ // nW, nW, H, N, N) + mask.unsqueeze(1).unsqueeze(0)``)."""

    def __init__(self, dim: int, side: int, heads: int, ws: int, shift: int):
        super().__init__()
        self.side, self.heads, self.ws, self.shift = side, heads, ws, shift
        self.norm = nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)
        img_mask = torch.zeros((1, side, side, 1))
        cnt = 0
        for h in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            for w in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                img_mask[:, h, w, :] = cnt
                cnt += 1
        mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)   # (nW, ws*ws)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)
        self.register_buffer("attn_mask", attn_mask)                  # (nW, ws*ws, ws*ws)

    def attention(self, x):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                              # (B*nW, H, ws*ws, d_k) [sw-q]
        attn = (q * (C // self.heads) ** -0.5) @ k.transpose(-2, -1)  # (B*nW, H, ws*ws, ws*ws)
        nW = self.attn_mask.shape[0]
        attn = attn.view(B_ // nW, nW, self.heads, N, N) + self.attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, N, N).softmax(dim=-1)        # (B*nW, H, ws*ws, ws*ws)
        return self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C))  # (B*nW, ws*ws, C)

    def forward(self, x):
        B, L, C = x.shape
        s, ws = self.shift, self.ws
        shortcut = x
        x = self.norm(x).view(B, self.side, self.side, C)              # (B, H, W, C)
        shifted_x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))        # (B, H, W, C) [sw-shift]
        x_windows = window_partition(shifted_x, ws).view(-1, ws * ws, C)  # (B*nW, ws*ws, C)
        attn_windows = self.attention(x_windows).view(-1, ws, ws, C)   # (B*nW, ws, ws, C)
        shifted_x = window_reverse(attn_windows, ws, self.side, self.side)  # (B, H, W, C)
        x = torch.roll(shifted_x, shifts=(s, s), dims=(1, 2))          # (B, H, W, C) [sw-unshift]
        return shortcut + x.view(B, L, C)                              # (B, L, C) [sw-out]


def swin(B: int, side: int, dim: int, heads: int, ws: int, shift: int):
    def make():
        return ShiftedWindowBlock(dim, side, heads, ws, shift).eval(), (torch.randn(B, side * side, dim),)
    return make


class SwinIRBlock(nn.Module):
    """JingyunLiang/SwinIR models/network_swinir.py: the image's size read as ``x_size = (x.shape[2],
    x.shape[3])``, patches flattened (``PatchEmbed``: ``x.flatten(2).transpose(1, 2)``), and at a
    resolution other than the training one, the shifted-window mask computed in ``forward`` by
    ``calculate_mask(x_size)``: ``img_mask = torch.zeros((1, H, W, 1))`` filled by slices, then
    ``window_partition``. ``partition_mask=False`` takes the mask's windows with a plain ``view`` (no
    permute): row-major stripes of the image, not its windows, the window-order family of
    uni-medical/SAM-Med3D#42."""

    def __init__(self, dim: int, heads: int, ws: int, shift: int, partition_mask: bool = True):
        super().__init__()
        self.heads, self.ws, self.shift, self.partition_mask = heads, ws, shift, partition_mask
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)

    def calculate_mask(self, x_size):
        H, W = x_size
        ws, s = self.ws, self.shift
        img_mask = torch.zeros((1, H, W, 1))                          # (1, H, W, 1)
        cnt = 0
        for h in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
            for w in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
                img_mask[:, h, w, :] = cnt
                cnt += 1
        if self.partition_mask:
            mask_windows = window_partition(img_mask, ws)             # (nW, ws, ws, 1)
        else:
            mask_windows = img_mask.view(-1, ws, ws, 1)               # (nW?, ws?, ws?, 1) [bug-ir-mask]
        mask_windows = mask_windows.view(-1, ws * ws)                 # (nW, ws*ws) [ir-mask-windows]
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)  # (nW, ws*ws, ws*ws)
        return attn_mask.masked_fill(attn_mask != 0, -100.0).masked_fill(attn_mask == 0, 0.0)

    def forward(self, image):
        x_size = (image.shape[2], image.shape[3])
        x = image.flatten(2).transpose(1, 2)                          # (B, N, C) [ir-tokens]
        H, W = x_size
        B, L, C = x.shape
        mask = self.calculate_mask(x_size)                            # (nW, ws*ws, ws*ws)
        x = torch.roll(x.view(B, H, W, C), shifts=(-self.shift, -self.shift), dims=(1, 2))  # [ir-shift]
        x_windows = window_partition(x, self.ws).view(-1, self.ws * self.ws, C)  # (B*nW, ws*ws, C)
        B_, N, _ = x_windows.shape
        qkv = self.qkv(x_windows).reshape(B_, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                              # (B*nW, H, ws*ws, d_k)
        attn = q @ k.transpose(-2, -1)                                # (B*nW, H, ws*ws, ws*ws)
        nW = mask.shape[0]
        attn = attn.view(B_ // nW, nW, self.heads, N, N) + mask.unsqueeze(1).unsqueeze(0)  # [ir-add-mask]
        attn = attn.view(-1, self.heads, N, N).softmax(dim=-1)        # (B*nW, H, ws*ws, ws*ws)
        y = self.proj((attn @ v).transpose(1, 2).reshape(B_, N, C)).view(-1, self.ws, self.ws, C)
        y = window_reverse(y, self.ws, H, W)                          # (B, H, W, C)
        y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))  # (B, H, W, C)
        return y.view(B, H * W, C)                                    # (B, N, C) [ir-out]


def swinir(B: int, side: int, dim: int, heads: int, **kwargs):
    def make():
        return SwinIRBlock(dim, heads, ws=2, shift=1, **kwargs).eval(), (torch.randn(B, dim, side, side),)
    return make


# -- PVT / SegFormer spatial reduction --------------------------------------------------------------


class SpatialReductionAttention(nn.Module):
    """whai362/PVT classification/pvt.py ``Attention`` with ``sr_ratio > 1`` (NVlabs/SegFormer
    ``mix_transformer.py`` ``Attention`` is the same): queries from every token, keys and values from
    ``x`` laid out as an image, a strided ``Conv2d(C, C, sr, sr)``, flattened back. ``permute=False``
    drops the ``permute(0, 2, 1)`` before the image reshape: channels and tokens interleaved, the
    reshape-for-permute slip of the conv-stem cases."""

    def __init__(self, dim: int, heads: int, sr: int, permute: bool = True):
        super().__init__()
        self.heads, self.permute = heads, permute
        self.scale = (dim // heads) ** -0.5
        self.q, self.kv, self.proj = nn.Linear(dim, dim), nn.Linear(dim, dim * 2), nn.Linear(dim, dim)
        self.sr = nn.Conv2d(dim, dim, kernel_size=sr, stride=sr)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, H: int, W: int):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)  # (B, H, N, d_k) [sr-q]
        if self.permute:
            x_ = x.permute(0, 2, 1).reshape(B, C, H, W)              # (B, C, h, w)
        else:
            x_ = x.reshape(B, C, H, W)                               # (B, ?, ?, ?) [bug-sr-image]
        x_ = self.sr(x_).reshape(B, C, -1).permute(0, 2, 1)          # (B, N', C) [sr-keys]
        x_ = self.norm(x_)
        kv = self.kv(x_).reshape(B, -1, 2, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)  # (2, B, H, N', d_k)
        k, v = kv[0], kv[1]                                          # (B, H, N', d_k) [sr-k]
        attn = (q @ k.transpose(-2, -1)) * self.scale                # (B, H, N, N') [sr-scores]
        attn = attn.softmax(dim=-1)                                  # (B, H, N, N') [sr-softmax]
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)              # (B, N, C) [sr-merge]
        return self.proj(x)


def pvt(B: int, side: int, dim: int, heads: int, sr: int, **kwargs):
    def make():
        model = SpatialReductionAttention(dim, heads, sr, **kwargs).eval()
        return (lambda x: model(x, side, side)), (torch.randn(B, side * side, dim),)
    return make


# -- transformers' GPT-2: the causal mask sliced from a registered buffer ----------------------------


class GPT2Attention(nn.Module):
    """huggingface/transformers models/gpt2/modeling_gpt2.py ``GPT2Attention`` (eager ``_attn``): the
    ``bias`` buffer ``tril(ones(max_positions, max_positions)).view(1, 1, n, n)``, sliced as
    ``self.bias[:, :, key_length - query_length : key_length, :key_length]`` with the lengths read from
    ``query.size(-2)`` and ``key.size(-2)``, applied with ``torch.where``. ``sizes_from_batch=True``
    reads the length from ``x.size(0)`` of batch-first input: the seq-first/batch-first slip of
    karpathy/minGPT-style code run on ``[B, T, C]`` (pytorch/pytorch#43112 asks for ``batch_first``
    because of it): at B = T the mask is B × B and lines up with the tokens."""

    def __init__(self, dim: int, heads: int, max_positions: int = 16, sizes_from_batch: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.sizes_from_batch = heads, dim // heads, sizes_from_batch
        bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool))
        self.register_buffer("bias", bias.view(1, 1, max_positions, max_positions), persistent=False)
        self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def _split_heads(self, tensor):
        new_shape = tensor.size()[:-1] + (self.heads, self.head_dim)
        return tensor.view(new_shape).permute(0, 2, 1, 3)            # (B, H, T, d_k)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()             # (B, T, H, d_k)
        return tensor.view(tensor.size()[:-2] + (self.heads * self.head_dim,))  # (B, T, D)

    def forward(self, x):
        query, key, value = self.c_attn(x).split(self.heads * self.head_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))     # (B, H, T, T)
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype)
        query_length, key_length = query.size(-2), key.size(-2)
        if self.sizes_from_batch:
            query_length = key_length = x.size(0)                    # B, not T [bug-gpt2-length]
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]  # (1, 1, T, T) [gpt2-mask]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)  # (B, H, T, T) [gpt2-where]
        attn_weights = F.softmax(attn_weights, dim=-1)
        return self.c_proj(self._merge_heads(torch.matmul(attn_weights, value)))  # (B, T, D)


def gpt2(B: int, T: int, dim: int, heads: int, **kwargs):
    def make():
        return GPT2Attention(dim, heads, **kwargs).eval(), (torch.randn(B, T, dim),)
    return make


# -- gathers and folds that work today: kept as cases ----------------------------------------------


def mae_random_masking(x, mask_ratio: float = 0.5):
    """facebookresearch/mae models_mae.py ``random_masking``: keep a random subset of the patches."""
    N, L, D = x.shape
    len_keep = int(L * (1 - mask_ratio))
    noise = torch.rand(N, L)
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_keep = ids_shuffle[:, :len_keep]
    return torch.gather(x, dim=1, index=ids_keep.unsqueeze(-1).repeat(1, 1, D))  # (B, T', D) [mae-gather]


def head_major_fold(x, heads: int):
    """Kyubyong/transformer ``multihead_attention`` (ported to torch): heads split off the features and
    stacked over the batch, head-major, with ``cat(split(x, d_k, -1), 0)``, and put back with
    ``cat(split(y, B, 0), -1)``."""
    B = x.shape[0]
    q = torch.cat(torch.split(x, x.shape[-1] // heads, dim=-1), dim=0)  # (H*B, T, d_k) [fold-heads]
    w = (q @ q.transpose(1, 2)).softmax(dim=-1)                      # (H*B, T, T) [fold-scores]
    return torch.cat(torch.split(w @ q, B, dim=0), dim=-1)           # (B, T, D) [fold-back]


class LucidrainsClassToken(nn.Module):
    """lucidrains/vit-pytorch ``ViT``: ``torch.cat((cls_tokens, x), dim=1)``, then ``Attention`` with
    ``rearrange(t, 'b n (h d) -> b h n d')`` written here as the ``(b h)`` fold of lucidrains' older
    ``reformer``/``linear-attention`` code (``'b n (h d) -> (b h) n d'``)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

    def forward(self, x):
        b = x.shape[0]
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)   # (B, 1+T, D) [cls-cat]
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> (b h) n d", h=self.heads) for t in (q, k, v))  # [cls-fold]
        dots = torch.einsum("bid,bjd->bij", q, k)                    # (B*H, 1+T, 1+T) [cls-dots]
        out = torch.einsum("bij,bjd->bid", dots.softmax(dim=-1), v)
        return rearrange(out, "(b h) n d -> b n (h d)", h=self.heads)  # (B, 1+T, D) [cls-merge]


def function(fn, *shape, **kwargs):
    def make():
        return (lambda x: fn(x, **kwargs)), (torch.randn(*shape),)
    return make


def module(model_class, shape, *args):
    def make():
        return model_class(*args).eval(), (torch.randn(*shape),)
    return make


GRID = ("B", "T/6", "T%6", "D")
IMAGE = ("B", "D", "Hp", "Wp")
GRID_EQUAL = ("B", "T/4", "T%4", "D")

CASES = [
    # the windows are named by the pieces of the rolled grid they hold: 3 × 3 windows of 2 × 2 tokens
    # (B·nW = B·T/12·T/2%3, ws·ws = T/6%2·T%2), and at B = nW = H = ws·ws = 4 by the same pieces
    Case("swin-shifted-windows", "B=2 T=36 D=24 H=3", swin(2, 6, 24, 3, ws=2, shift=1),
         heads={"sw-shift": GRID, "sw-unshift": GRID, "sw-windows": ("B*T/12*T/2%3", "T/6%2", "T%2", "D"),
                "sw-q": ("B*T/12*T/2%3", "H", "T/6%2*T%2", "d_k"), "sw-out": ("B", "T", "D")},
         silent=("sw-shift", "sw-unshift", "sw-out")),
    Case("swin-shifted-windows-equal-sizes", "B=4 T=16 D=16 H=4", swin(4, 4, 16, 4, ws=2, shift=1),
         heads={"sw-shift": GRID_EQUAL, "sw-unshift": GRID_EQUAL, "sw-windows": ("B*T/8*T/2%2", "T/4%2", "T%2", "D"),
                "sw-q": ("B*T/8*T/2%2", "H", "T/4%2*T%2", "d_k"), "sw-out": ("B", "T", "D")},
         silent=("sw-shift", "sw-unshift", "sw-out")),
    # the mask computed in forward from sizes read off the image: named by the same window pieces as
    # the scores it is added to, at distinct sizes and at B = H = nW = ws·ws = 4
    Case("swinir-mask-from-image-size", "B=2 D=24 H=3", swinir(2, 6, 24, 3), names=(IMAGE,),
         heads={"ir-tokens": ("B", "N", "D"), "ir-mask-windows": ("Hp/2*Wp/2", "Hp%2*Wp%2"),
                "ir-shift": ("B", "Hp", "Wp", "D"),
                "ir-add-mask": ("B", "Hp/2*Wp/2", "H", "Hp%2*Wp%2", "Hp%2*Wp%2"), "ir-out": ("B", "N", "D")},
         silent=("ir-mask-windows", "ir-add-mask", "ir-out")),
    Case("swinir-mask-from-image-size-equal-sizes", "B=4 D=16 H=4", swinir(4, 4, 16, 4), names=(IMAGE,),
         heads={"ir-mask-windows": ("Hp/2*Wp/2", "Hp%2*Wp%2"),
                "ir-add-mask": ("B", "Hp/2*Wp/2", "H", "Hp%2*Wp%2", "Hp%2*Wp%2")},
         silent=("ir-mask-windows", "ir-add-mask", "ir-out")),
    Case("swinir-mask-windows-by-view", "B=2 D=24 H=3", swinir(2, 6, 24, 3, partition_mask=False),
         names=(IMAGE,), bug=("bug-ir-mask",)),
    Case("pvt-spatial-reduction", "B=2 N=64 D=24 H=3", pvt(2, 8, 24, 3, sr=2),
         heads={"sr-q": ("B", "H", "N", "d_k"), "sr-keys": ("B", "Hp*Wp", "D"), "sr-k": ("B", "H", "Hp*Wp", "d_k"),
                "sr-scores": ("B", "H", "N", "Hp*Wp"), "sr-merge": ("B", "N", "D")},
         silent=("sr-scores", "sr-softmax", "sr-merge")),
    Case("pvt-spatial-reduction-equal-sizes", "B=4 N=16 D=16 H=4", pvt(4, 4, 16, 4, sr=2),
         heads={"sr-k": ("B", "H", "Hp*Wp", "d_k"), "sr-scores": ("B", "H", "N", "Hp*Wp")},
         silent=("sr-scores", "sr-softmax", "sr-merge")),
    Case("pvt-image-reshape-without-permute", "B=2 N=64 D=24 H=3", pvt(2, 8, 24, 3, sr=2, permute=False),
         bug=("bug-sr-image",)),
    Case("gpt2-causal-mask-from-buffer", "B=2 T=6 D=24 H=3", gpt2(2, 6, 24, 3),
         heads={"gpt2-mask": ("_", "_", "T", "T"), "gpt2-where": ("B", "H", "T", "T")},
         silent=("gpt2-mask", "gpt2-where")),
    Case("gpt2-causal-mask-from-buffer-equal-sizes", "B=4 T=4 D=16 H=4", gpt2(4, 4, 16, 4),
         heads={"gpt2-mask": ("_", "_", "T", "T"), "gpt2-where": ("B", "H", "T", "T")},
         silent=("gpt2-mask", "gpt2-where")),
    Case("gpt2-causal-mask-sliced-by-batch-size", "B=4 T=4 D=16 H=4", gpt2(4, 4, 16, 4, sizes_from_batch=True),
         bug=("gpt2-where",)),
    Case("mae-gather-ids-keep", "B=2 T=8 D=12", function(mae_random_masking, 2, 8, 12),
         heads={"mae-gather": ("B", "T[ids_keep]", "D")}),
    Case("mae-gather-ids-keep-equal-sizes", "B=4 T=8 D=4", function(mae_random_masking, 4, 8, 4),
         heads={"mae-gather": ("B", "T[ids_keep]", "D")}),
    Case("head-major-cat-split-fold", "B=2 T=6 D=32 H=4", function(head_major_fold, 2, 6, 32, heads=4),
         heads={"fold-heads": ("H*B", "T", "d_k"), "fold-scores": ("H*B", "T", "T"), "fold-back": ("B", "T", "D")},
         silent=("fold-heads", "fold-scores", "fold-back")),
    Case("head-major-cat-split-fold-equal-sizes", "B=4 T=4 D=16 H=4", function(head_major_fold, 4, 4, 16, heads=4),
         heads={"fold-heads": ("H*B", "T", "d_k"), "fold-scores": ("H*B", "T", "T"), "fold-back": ("B", "T", "D")}),
    Case("einops-fold-after-class-token", "B=2 T=5 D=24 H=3", module(LucidrainsClassToken, (2, 5, 24), 24, 3),
         heads={"cls-cat": ("B", "1+T", "D"), "cls-fold": ("B*H", "1+T", "d_k"), "cls-dots": ("B*H", "1+T", "1+T"),
                "cls-merge": ("B", "1+T", "D")},
         silent=("cls-fold", "cls-dots", "cls-merge")),
    Case("einops-fold-after-class-token-equal-sizes", "B=4 T=3 D=16 H=4",
         module(LucidrainsClassToken, (4, 3, 16), 16, 4),
         heads={"cls-fold": ("B*H", "1+T", "d_k"), "cls-dots": ("B*H", "1+T", "1+T")}),
]


test_names, test_verdict = corpus_tests(__name__, CASES)

BY_ID = {c.id: c for c in CASES}


@pytest.mark.parametrize("case_id,rows", [
    ("swin-shifted-windows", {"sw-shift": "rolls T/6 by -1 and T%6 by -1",
                              "sw-unshift": "rolls T/6 by +1 and T%6 by +1"}),
    ("swin-shifted-windows-equal-sizes", {"sw-shift": "rolls T/4 by -1 and T%4 by -1",
                                          "sw-unshift": "rolls T/4 by +1 and T%4 by +1"}),
])
def test_a_rolled_axis_keeps_its_name_and_its_row_says_rolled(case_id, rows):
    t = trace_case(BY_ID[case_id])
    module = __import__(__name__, fromlist=["_"])
    for tag, words in rows.items():
        e = tagged_event(t, module, tag)
        assert e.outputs[0].dims == e.inputs[0].dims
        assert annotate(e).startswith(words + " (a cyclic shift: each axis keeps its name, its positions move round)")
        assert brief(e).startswith("roll " + words[len("rolls "):].replace(" and ", ", "))


def test_a_roll_and_a_flip_of_a_named_axis_are_told_apart():
    """A flip walks backwards and never wraps: it is not a roll (its row keeps the registry's words)."""
    x = torch.randn(2, 6, 5)
    with shapetrace.trace(dims="B=2 T=6 D=5") as t:
        torch.flip(x, dims=(1,))
        torch.roll(x, shifts=3, dims=1)
        torch.roll(x, shifts=0, dims=1)
    flip, half, none = t.events
    assert "rolled" not in flip.params and annotate(flip).startswith("reverses the order along axes")
    assert half.params["rolled"] == {1: 3} and annotate(half).startswith("rolls T by +3 (a cyclic shift")
    assert "rolled" not in none.params


@pytest.mark.parametrize("case_id", ["gpt2-causal-mask-from-buffer", "pvt-spatial-reduction",
                                     "swinir-mask-from-image-size"])
def test_every_op_is_checked_at_distinct_sizes(case_id):
    """The mask's slice (GPT-2), the shortened keys (PVT) and the window mask built from the image's size
    (SwinIR) are named, so the verdict can back a ``✓``."""
    t = trace_case(BY_ID[case_id])
    assert t.report().verdict.line.startswith("✓ checked all"), t.report().verdict.line


def test_a_decode_steps_mask_row_is_not_named_from_its_stop_alone():
    """A slice that starts part way (``bias[:, :, k - q : k, :k]`` at a decode step, here with 4 of 6
    rows) is not the axis its stop was read from: only the key axis, from 0 to k, is named."""
    model = GPT2Attention(24, 3).eval()
    x = torch.randn(2, 6, 24)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=24 H=3") as t:
        k = model.c_attn(x).split(24, dim=2)[1]
        key = model._split_heads(k)
        key_length = key.size(-2)
        model.bias[:, :, key_length - 4: key_length, :key_length]
    assert t.events[-1].outputs[0].dims == (None, None, None, "T")
