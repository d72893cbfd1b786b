"""pie-project/pie pull request #603 ("rope_partial: rotate over the rotary width, not the head width (Metal +
CUDA)", merged, fixes #602): ``rope_partial`` rotated the first ``rotary_dim/2`` pairs of a head with
frequencies ``theta^(-2i/head_dim)`` and pairs ``(i, i + head_dim/2)``, where HF transformers, mlx-lm and
llama.cpp use ``theta^(-2i/rotary_dim)`` and pairs ``(i, i + rotary_dim/2)``: the two agree at position 0
and drift with distance, so quality fell with context length on every model with ``rotary_dim < head_dim``
(Qwen3.5/3.6, GLM-5, Gemma-4's global layers).

The idiom (the reference the fix matches, HF's partial rotary in torch): ``q_proj``/``k_proj``/``v_proj``/
``o_proj``, heads split with ``view(B, T, H, d)`` and ``transpose(1, 2)``, ``inv_freq`` over the rotary
width, ``cos``/``sin`` of ``cat((freqs, freqs))``, ``q[..., :rotary_dim]`` rotated with ``rotate_half`` and
the rest passed through and ``cat``ed back; causal scores ``q k^T / sqrt(d)``, ``softmax(-1)``, heads merged.

Bug (pairing): ``head-width-pairs``: the kernel's old convention, written in torch: frequencies over the
head width and each of the first ``rotary_dim/2`` features ``i`` paired with ``i + head_dim/2``; the other
features pass through."""

import math
import sys

import torch
from torch import nn

BUGS = ("head-width-pairs",)
TWINS = ()
DIMS = ("B=2 T=6 D=64 H=4",)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class PartialRopeAttention(nn.Module):
    def __init__(self, hidden, num_heads, partial_rotary_factor=0.25, bug="", theta=10000.0):
        super().__init__()
        self.bug, self.num_heads = bug, num_heads
        self.head_dim = hidden // num_heads
        self.rotary_dim = int(self.head_dim * partial_rotary_factor)
        self.theta = theta
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def rope(self, x, positions):
        rd, hd = self.rotary_dim, self.head_dim
        if self.bug == "head-width-pairs":
            inv_freq = 1.0 / self.theta ** (torch.arange(0, rd, 2).float() / hd)
            freqs = positions[:, None].float() * inv_freq                          # (T, rd/2)
            cos, sin = freqs.cos(), freqs.sin()
            x1, x2 = x[..., : rd // 2], x[..., hd // 2: hd // 2 + rd // 2]          # (B, H, T, rd/2)
            y1, y2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
            return torch.cat((y1, x[..., rd // 2: hd // 2], y2, x[..., hd // 2 + rd // 2:]), dim=-1)  # (B, H, T, d)
        inv_freq = 1.0 / self.theta ** (torch.arange(0, rd, 2).float() / rd)
        freqs = positions[:, None].float() * inv_freq                              # (T, rd/2)
        emb = torch.cat((freqs, freqs), dim=-1)                                    # (T, rd)
        x_rot, x_pass = x[..., :rd], x[..., rd:]                                   # (B, H, T, rd)
        x_rot = x_rot * emb.cos() + rotate_half(x_rot) * emb.sin()
        return torch.cat((x_rot, x_pass), dim=-1)                                  # (B, H, T, d)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        k = self.k_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        v = self.v_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)   # (B, H, T, d)
        positions = torch.arange(T)
        q, k = self.rope(q, positions), self.rope(k, positions)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)      # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, -1)               # (B, T, H*d)
        return self.o_proj(out)


def build(bug="", B=2, T=6, D=64, H=4):
    torch.manual_seed(0)
    return PartialRopeAttention(D, H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
