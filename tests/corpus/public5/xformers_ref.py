"""facebookresearch/xformers, tests/test_mem_eff_attention.py (``ref_attention`` on BMK tensors and
``ref_attention_bmhk``, the reference the memory-efficient kernels are checked against): inputs laid out
``[B, M, H, K]``, folded to ``[B*H, M, K]`` by ``permute((0, 2, 1, 3)).reshape(...)``, scaled queries,
``q @ k.transpose(-2, -1)``, softmax, ``@ v``, and the result unfolded by ``reshape([B, H, M, K])`` and
``permute((0, 2, 1, 3))`` back to ``[B, M, H, K]``.

Bug (argument): ``unfold-order``: the result unfolded as ``reshape([B, M, H, K])`` (the input's layout,
not the folded one) with no permute: each output row mixes heads and queries (the fold/unfold mismatch
that the bmhk reference exists to prevent)."""

import sys

import torch
from torch import nn


def ref_attention(q, k, v, scale=None):
    q = q * (scale if scale is not None else q.shape[-1] ** -0.5)  # (B*H, M, K)
    attn = q @ k.transpose(-2, -1)  # (B*H, M, N)
    attn = attn.softmax(-1)
    return attn @ v  # (B*H, M, K)


def ref_attention_bmhk(q, k, v, bug=""):
    def T(t):
        return t.permute((0, 2, 1, 3)).reshape([t.shape[0] * t.shape[2], t.shape[1], t.shape[3]])  # (B*H, M, K)

    out = ref_attention(T(q), T(k), T(v))
    if bug == "unfold-order":
        return out.reshape([q.shape[0], q.shape[1], q.shape[2], q.shape[3]])  # bug: (B, M?, H?, K)
    out = out.reshape([q.shape[0], q.shape[2], q.shape[1], q.shape[3]])  # (B, H, M, K)
    return out.permute((0, 2, 1, 3))  # (B, M, H, K)


class BMHKAttention(nn.Module):
    def __init__(self, dim, heads, bug=""):
        super().__init__()
        self.heads, self.bug = heads, bug
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, M, D = x.shape
        q, k, v = self.qkv(x).reshape(B, M, 3, self.heads, D // self.heads).unbind(2)  # (B, M, H, K) each
        out = ref_attention_bmhk(q, k, v, self.bug)  # (B, M, H, K)
        return self.proj(out.reshape(B, M, D))  # (B, M, D)


def build(bug="", B=2, T=6, D=32, H=4):
    """--dims B=2,T=6,D=32,H=4."""
    torch.manual_seed(0)
    return BMHKAttention(D, H, bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
