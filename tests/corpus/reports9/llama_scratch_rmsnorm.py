"""bkitano/llama-from-scratch issue #4 ("Incorrect RMSNorm", a second user: "I agree with you"): the notebook's
``RMSNorm`` took the root mean square over the ``(T, D)`` axes of its ``(B, T, D)`` input,
``torch.linalg.norm(x, dim=(1, 2)) * x[0].numel() ** -.5``, one statistic per sequence instead of one per token.
In a causal language model that lets every token's normalisation read the later tokens' features (a leak of
the future into the past); LLaMA's own norm is ``x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``.

The idiom: pre-norm blocks of causal multi-head attention (``view(B, T, H, d).transpose(1, 2)``,
``masked_fill`` with a lower-triangular mask, ``softmax(-1)``) with the notebook's ``RMSNorm`` before the
attention and before the feed-forward layer.

Bug (argument): ``rms-over-sequence``: the RMS taken over ``dim=(1, 2)``."""

import sys

import torch
from torch import nn

BUGS = ("rms-over-sequence",)
TWINS = ()
DIMS = ("B=2 T=6 D=32 H=4",)


class RMSNorm(nn.Module):
    def __init__(self, dim, bug="", eps=1e-6):
        super().__init__()
        self.scale, self.bug, self.eps = nn.Parameter(torch.ones(dim)), bug, eps

    def forward(self, x):                                                              # (B, T, D)
        if self.bug == "rms-over-sequence":
            rms = torch.linalg.norm(x, dim=(1, 2)) * x[0].numel() ** -.5                # (B,)
            return self.scale * x / rms.unsqueeze(-1).unsqueeze(-1)                     # (B, T, D)
        return self.scale * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # (B, T, D)


class CausalAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (w(x).view(b, t, self.heads, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5                        # (B, H, T, T)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
        out = scores.softmax(dim=-1) @ v                                               # (B, H, T, d)
        return self.wo(out.transpose(1, 2).contiguous().view(b, t, d))                # (B, T, D)


class Block(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim, bug), RMSNorm(dim, bug)
        self.attn = CausalAttention(dim, heads)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


def build(bug="", B=2, T=6, D=32, H=4):
    torch.manual_seed(0)
    return Block(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
