"""Dao-AILab/flash-attention ``flash_attn/layers/rotary.py`` and ``flash_attn/modules/mha.py`` (the idiom): a
``RotaryEmbedding(dim, interleaved=...)`` module whose ``interleaved`` flag says how its features pair (False:
GPT-NeoX's halves, i with i + d/2; True: GPT-J's 2k with 2k + 1), a table of ``cos``/``sin`` of shape
``(seqlen, rotary_dim / 2)`` grown to the rotary width by ``einops.repeat`` the way the flag says (``"... d -> ... 1
(2 d)"`` or ``"... d -> ... 1 (d 2)"``), ``rotate_half(x, interleaved)`` and ``apply_rotary_emb_torch`` on the first
``rotary_dim`` features of q and k, packed ``qkv`` of shape ``(batch, seqlen, 3, nheads, headdim)``, then causal
attention (``scaled_dot_product_attention`` on ``(b, h, s, d)``) and ``out_proj``.

Bug (the class of vllm-project/vllm-ascend pull request #12820, "silently corrupting all position information": a
model's pairing flag ignored by the call that rotates): ``flag-dropped``: the module holds ``interleaved=True`` (a
GPT-J checkpoint) but ``forward`` calls ``apply_rotary_emb_torch`` without passing it, so the table and the rotation
both pair by halves, agreeing with each other and not with the weights. Twins: ``neox`` (``interleaved=False``,
halves throughout) and ``partial`` (a GPT-J model rotating the first half of each head only, as GPT-J's
``rotary_dim`` does)."""

import sys

import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

BUGS = ("flag-dropped",)
TWINS = ("neox", "partial")
DIMS = ("B=2 T=6 D=64 H=4",)


def rotate_half(x, interleaved=False):
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)                                                  # (..., d/2) each
        return torch.cat((-x2, x1), dim=-1)                                          # (..., d)
    x1, x2 = x[..., ::2], x[..., 1::2]                                               # (..., d/2) each
    return rearrange(torch.stack((-x2, x1), dim=-1), "... d two -> ... (d two)", two=2)   # (..., d)


def apply_rotary_emb_torch(x, cos, sin, interleaved=False):
    ro_dim = cos.shape[-1] * 2
    cos = repeat(cos, "... d -> ... 1 (2 d)" if not interleaved else "... d -> ... 1 (d 2)")   # (s, 1, ro_dim)
    sin = repeat(sin, "... d -> ... 1 (2 d)" if not interleaved else "... d -> ... 1 (d 2)")   # (s, 1, ro_dim)
    rotated = x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim], interleaved) * sin          # (b, s, h, ro_dim)
    return torch.cat([rotated, x[..., ro_dim:]], dim=-1)                                       # (b, s, h, d)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, interleaved=False, bug=""):
        super().__init__()
        self.dim, self.interleaved, self.bug = dim, interleaved, bug
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, qkv):
        seqlen = qkv.shape[1]
        freqs = torch.outer(torch.arange(seqlen, dtype=torch.float32), self.inv_freq)   # (s, ro_dim/2)
        cos, sin = torch.cos(freqs), torch.sin(freqs)
        interleaved = False if self.bug == "flag-dropped" else self.interleaved
        q = apply_rotary_emb_torch(qkv[:, :, 0], cos, sin, interleaved)               # (b, s, h, d)
        k = apply_rotary_emb_torch(qkv[:, :, 1], cos, sin, interleaved)               # (b, s, h, d)
        return torch.stack((q, k, qkv[:, :, 2]), dim=2)                                # (b, s, 3, h, d)


class MHA(nn.Module):
    def __init__(self, embed_dim, num_heads, bug=""):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        rotary_dim = self.head_dim // 2 if bug == "partial" else self.head_dim
        self.Wqkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.rotary_emb = RotaryEmbedding(rotary_dim, interleaved=bug != "neox", bug=bug)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        qkv = rearrange(self.Wqkv(x), "b s (three h d) -> b s three h d", three=3, d=self.head_dim)   # (b, s, 3, h, d)
        qkv = self.rotary_emb(qkv)
        q, k, v = rearrange(qkv, "b s three h d -> three b h s d")                    # (b, h, s, d) each
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)                # (b, h, s, d)
        return self.out_proj(rearrange(out, "b h s d -> b s (h d)"))                  # (b, s, D)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return MHA(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
