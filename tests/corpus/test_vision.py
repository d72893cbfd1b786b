"""Vision transformers from pixels: ViT/DeiT patch stems, class tokens joined by ``cat``, Swin windows,
and channel-first maps flattened with and without the permute they need (issue 21, corpus)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.corpus.helpers import Case, corpus_tests

VIT_DIMS = "B=2 N=16 D=24 H=3"      # 16x16 pixels, 4x4 patches: N = 16 tokens, d_k = 8
PIXELS = (2, 3, 16, 16)


class TimmAttention(nn.Module):
    """timm's ``Attention`` (huggingface/pytorch-image-models, timm/models/vision_transformer.py): one
    fused qkv projection, ``reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``, ``unbind(0)``, then SDPA
    (``fused_attn``) or the explicit product."""

    def __init__(self, dim: int, heads: int, fused: bool, reshape_only: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.fused, self.reshape_only = heads, dim // heads, fused, reshape_only
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        if self.reshape_only:
            qkv = self.qkv(x).reshape(3, B, self.heads, N, self.head_dim)  # (3?, B?, H?, N?, d_k?) [bug-qkv-reshape]
        else:
            qkv = self.qkv(x).reshape(B, N, 3, self.heads, self.head_dim)  # (B, N, 3, H, d_k) [timm-qkv]
            qkv = qkv.permute(2, 0, 3, 1, 4)                          # (3, B, H, N, d_k)
        q, k, v = qkv.unbind(0)                                       # 3 x (B, H, N, d_k) [vit-q]
        if self.fused:
            x = F.scaled_dot_product_attention(q, k, v)               # (B, H, N, d_k) [vit-sdpa]
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)             # (B, H, N, N) [vit-scores]
            x = attn.softmax(dim=-1) @ v                              # (B, H, N, d_k)
        x = x.transpose(1, 2).reshape(B, N, C)                        # (B, N, D) [vit-merge]
        return self.proj(x)


class PatchEmbed(nn.Module):
    """timm's ``PatchEmbed``: a strided Conv2d, then ``flatten(2).transpose(1, 2)`` (NCHW -> NLC)."""

    def __init__(self, dim: int, patch: int = 4):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)                # (B, N, D) [vit-tokens]


class ViT(nn.Module):
    """A one-block timm ``VisionTransformer``: patch stem, class token joined with ``torch.cat``
    (``_pos_embed``), learned positions, pre-norm attention."""

    def __init__(self, dim: int = 24, heads: int = 3, fused: bool = False, tokens: int = 16):
        super().__init__()
        self.patch_embed = PatchEmbed(dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.norm = nn.LayerNorm(dim)
        self.attn = TimmAttention(dim, heads, fused)

    def forward(self, pixels):
        x = self.patch_embed(pixels)                                  # (B, N, D)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)  # (B, 1+N, D) [vit-cls]
        x = x + self.pos_embed                                        # (B, 1+N, D)
        h = self.norm(x)                                              # (B, 1+N, D) [vit-norm]
        return x + self.attn(h)                                       # (B, 1+N, D)


class DeiT(ViT):
    """facebookresearch/deit ``DistilledVisionTransformer``: a class and a distillation token, both
    joined by ``cat`` before the patches (2+N tokens), attention through SDPA."""

    def __init__(self):
        super().__init__(fused=True, tokens=17)
        self.dist_token = nn.Parameter(torch.zeros(1, 1, 24))

    def forward(self, pixels):
        x = self.patch_embed(pixels)                                  # (B, N, D)
        B = x.shape[0]
        x = torch.cat((self.cls_token.expand(B, -1, -1), self.dist_token.expand(B, -1, -1), x), dim=1)  # [deit-cat]
        x = x + self.pos_embed                                        # (B, 2+N, D)
        return x + self.attn(self.norm(x))                            # (B, 2+N, D)


class ConvStemNoPermute(nn.Module):
    """A conv stem flattened channel-first without moving the channels last: ``reshape(B, -1, C)`` on
    ``[B, C, h, w]``. Each "token" then holds pieces of several channels and positions. Reported in
    gupta-abhay/pytorch-vit#7 (NCHW flattened without a permute) and
    tianrun-chen/SAM-Adapter-PyTorch#134 (a reshape under the wrong memory order "does not raise")."""

    def __init__(self, dim: int = 24, heads: int = 3, permute: bool = False):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.attn = TimmAttention(dim, heads, fused=True)
        self.permute = permute

    def forward(self, pixels):
        x = self.stem(pixels)                                         # (B, D, h, w)
        B, C = x.shape[:2]
        if self.permute:
            x = x.permute(0, 2, 3, 1).reshape(B, -1, C)               # (B, N, D) [stem-permute]
        else:
            x = x.reshape(B, -1, C)                                   # (B, ?, ?): mixed [bug-stem-no-permute]
        return self.attn(x)


class UnfoldPatches(nn.Module):
    """gupta-abhay/pytorch-vit (issue #7): patches cut with ``Tensor.unfold`` twice, then
    ``.contiguous().view(B, -1, C*p*p)`` on ``[B, C, gh, gw, p, p]``: the flattened "patches" mix
    channels with patch rows. The fix from the issue permutes the channels behind the grid first."""

    def __init__(self, dim: int = 24, heads: int = 3, patch: int = 4, permute: bool = False):
        super().__init__()
        self.patch, self.permute = patch, permute
        self.embed = nn.Linear(3 * patch * patch, dim)
        self.attn = TimmAttention(dim, heads, fused=False)

    def forward(self, pixels):
        p = self.patch
        B, C = pixels.shape[:2]
        x = pixels.unfold(2, p, p).unfold(3, p, p)                    # (B, C, gh, gw, p, p)
        if self.permute:
            x = x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * p * p)  # (B, N, C*p*p) [unfold-permute]
        else:
            x = x.contiguous().view(B, -1, C * p * p)                 # (B, ?, ?): mixed [bug-unfold-view]
        return self.attn(self.embed(x))                               # (B, N, D)


def timm_on_tokens(**kwargs):
    """timm's ``Attention`` alone, on tokens [B, T, D] that ``dims`` name. ``reshape_only=True`` writes
    ``reshape(3, B, H, N, d)`` where timm permutes: the reshape-for-permute slip of
    huggingface/diffusers#10303 (``head_to_batch_dim`` reshapes where a permutation is due) and
    xieenze/Trans2Seg#4 (a reshape that does not move heads and tokens)."""
    def make():
        return TimmAttention(24, 3, **kwargs).eval(), (torch.randn(2, 5, 24),)
    return make


def window_partition(x, ws: int):
    """microsoft/Swin-Transformer ``window_partition``: (B, h, w, C) -> (B*nW, ws, ws, C)."""
    B, h, w, C = x.shape
    x = x.view(B, h // ws, ws, w // ws, ws, C)                        # (B, h/ws, ws, w/ws, ws, D) [swin-split]
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C)  # (B*nW, ws, ws, D) [swin-windows]


def window_reverse(windows, ws: int, h: int, w: int, permute: bool = True):
    """microsoft/Swin-Transformer ``window_reverse``: (B*nW, ws, ws, C) -> (B, h, w, C)."""
    B = windows.shape[0] // (h * w // ws // ws)
    x = windows.view(B, h // ws, w // ws, ws, ws, -1)                 # (B, h/ws, w/ws, ws, ws, D)
    if not permute:
        return x.view(B, h, w, -1)                                    # (B, ?, ?, D): mixed [bug-swin-reverse]
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, h, w, -1)  # (B, h, w, D) [swin-reverse]


class SwinBlock(nn.Module):
    """A Swin block from pixels: patch stem, ``window_partition``, Swin's ``WindowAttention``
    (``qkv.reshape(B_, N, 3, H, C // H).permute(2, 0, 3, 1, 4)``), ``window_reverse``. With
    ``permute=False`` the reverse drops its permute: rows of different windows are interleaved, the
    window-order bug family of uni-medical/SAM-Med3D#42 (``window_unpartition`` puts axes in the
    wrong order)."""

    def __init__(self, dim: int = 24, heads: int = 3, ws: int = 2, permute: bool = True, shift: int = 0):
        super().__init__()
        self.ws, self.heads, self.permute, self.shift = ws, heads, permute, shift
        self.patch_embed = PatchEmbed(dim)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, pixels):
        x = self.patch_embed(pixels)                                  # (B, N, D)
        B, N, C = x.shape
        h = w = int(N ** 0.5)
        grid = x.view(B, h, w, C)                                     # (B, Hp, Wp, D)
        if self.shift:
            grid = torch.roll(grid, shifts=(-self.shift, -self.shift), dims=(1, 2))  # (B, Hp, Wp, D)
        windows = window_partition(grid, self.ws).view(-1, self.ws * self.ws, C)  # (B*nW, ws*ws, D)
        B_, n, _ = windows.shape
        qkv = self.qkv(windows).reshape(B_, n, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                              # (B*nW, H, ws*ws, d_k) [swin-q]
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)              # (B*nW, H, ws*ws, ws*ws)
        y = (attn @ v).transpose(1, 2).reshape(B_, n, C)              # (B*nW, ws*ws, D)
        y = window_reverse(self.proj(y).view(-1, self.ws, self.ws, C), self.ws, h, w, self.permute)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))  # (B, Hp, Wp, D) [swin-unshift]
        return x + y.view(B, N, C)                                    # (B, N, D) [swin-out]


def build(model_class, **kwargs):
    def make():
        return model_class(**kwargs).eval(), (torch.randn(*PIXELS),)
    return make


PER_HEAD = ("B", "H", "seq", "d_k")
NO_CONV = "Conv2d is not followed: a conv stem's output [B, D, h, w] and the tokens flattened from it stay unnamed"

CASES = [
    Case("vit-patch-stem-cls-token", VIT_DIMS, build(ViT),
         heads={"vit-tokens": ("B", "seq", "D"), "vit-cls": ("B", "seq", "D"), "vit-q": PER_HEAD,
                "vit-scores": ("B", "H", "seq", "seq"), "vit-merge": ("B", "seq", "D"), "vit-norm": ("B", "seq", "D")},
         silent=("timm-qkv",)),
    Case("vit-patch-stem-fused-sdpa", VIT_DIMS, build(ViT, fused=True),
         heads={"vit-q": PER_HEAD, "vit-sdpa": PER_HEAD, "vit-merge": ("B", "seq", "D")},
         silent=("timm-qkv",)),
    Case("deit-cls-and-distillation-tokens", VIT_DIMS, build(DeiT),
         heads={"deit-cat": ("B", "seq", "D"), "vit-q": PER_HEAD, "vit-sdpa": PER_HEAD},
         silent=("timm-qkv",)),
    Case("conv-stem-reshape-without-permute", VIT_DIMS, build(ConvStemNoPermute),
         bug=("bug-stem-no-permute",)),
    Case("conv-stem-permute-then-reshape", VIT_DIMS, build(ConvStemNoPermute, permute=True),
         heads={"stem-permute": ("B", "seq", "D"), "vit-q": PER_HEAD, "vit-sdpa": PER_HEAD},
         silent=("timm-qkv",)),
    Case("vit-unfold-patches-view-without-permute", VIT_DIMS, build(UnfoldPatches),
         bug=("bug-unfold-view",),
         verdict_xfail="pixels enter unnamed and unfold tiles an unnamed axis into unnamed pieces: the patch "
                       "grid is unnamed, so a view that mixes channels with patch rows is not seen"),
    Case("vit-unfold-patches-permute-then-reshape", VIT_DIMS, build(UnfoldPatches, permute=True),
         heads={"unfold-permute": ("B", "seq", "?"), "vit-q": PER_HEAD, "vit-scores": ("B", "H", "seq", "seq")},
         silent=("timm-qkv",),
         names_xfail="pixels enter unnamed and unfold tiles an unnamed axis into unnamed pieces: the patch "
                     "grid, the tokens made of it and the patch features the embedding reads stay unnamed"),
    Case("timm-attention-fused-qkv-on-tokens", "B=2 T=5 D=24 H=3", timm_on_tokens(fused=False),
         heads={"timm-qkv": ("B", "T", "?", "H", "d_k"), "vit-q": ("B", "H", "T", "d_k"),
                "vit-scores": ("B", "H", "T", "T"), "vit-merge": ("B", "T", "D")},
         silent=("timm-qkv",)),
    Case("timm-attention-qkv-reshape-instead-of-permute", "B=2 T=5 D=24 H=3",
         timm_on_tokens(fused=True, reshape_only=True), bug=("bug-qkv-reshape",)),
    Case("swin-window-partition-from-pixels", VIT_DIMS, build(SwinBlock),
         heads={"swin-windows": ("B*?", "?", "?", "D"), "swin-q": ("B*?", "H", "?", "d_k"),
                "swin-reverse": ("B", "?", "?", "D"), "swin-out": ("B", "seq", "D")}),
    Case("swin-window-reverse-without-permute", VIT_DIMS, build(SwinBlock, permute=False),
         bug=("bug-swin-reverse",)),
    # microsoft/Swin-Transformer SwinTransformerBlock with shift_size > 0: torch.roll before
    # window_partition and back after window_reverse, then ``shortcut + x.view(B, H * W, C)``. The
    # residual meets the tokens in row order again: no finding; each piece of the grid its own label.
    Case("swin-shifted-windows-rolled-back", VIT_DIMS, build(SwinBlock, shift=1),
         heads={"swin-split": ("B", "Hp/2", "Hp%2", "Wp/2", "Wp%2", "D"), "swin-q": ("B*?", "H", "?", "d_k"),
                "swin-unshift": ("B", "Hp", "Wp", "D"), "swin-out": ("B", "seq", "D")},
         silent=("swin-out", "swin-reverse", "swin-unshift")),
]


test_names, test_verdict = corpus_tests(__name__, CASES)
