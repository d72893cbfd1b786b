"""microsoft/unilm, Diff-Transformer/multihead_diffattn.py (https://github.com/microsoft/unilm/blob/master/
Diff-Transformer/multihead_diffattn.py) ``MultiheadDiffAttn.forward``: queries and keys split into
2·H half-width heads, values into H double-width heads; two softmax maps per head subtracted with a
learned λ (``attn_weights.view(bsz, num_heads, 2, tgt_len, src_len)``, ``[:, :, 0] - λ · [:, :, 1]``),
a per-head RMS norm, ``transpose(1, 2).reshape(bsz, tgt_len, num_heads * 2 * head_dim)``. Rotary left out.

Bugs (argument): ``no-transpose``: the heads merged with ``reshape(bsz, tgt_len, ...)`` straight from
``[B, H, T, 2d]``, the merge slip whose split twin FuxiCTR#30 reports; ``pairs-mixed``:
the two maps taken as ``view(bsz, 2, num_heads, ...)``, pairing half-head h with h + H instead of 2h with
2h + 1 (a fixed permutation of learned heads: it trains, but breaks the released weights)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def lambda_init_fn(depth):
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


class MultiheadDiffAttn(nn.Module):
    def __init__(self, embed_dim, depth, num_heads, bug=""):
        super().__init__()
        self.embed_dim, self.num_heads, self.bug = embed_dim, num_heads, bug
        self.head_dim = embed_dim // num_heads // 2
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.lambda_init = lambda_init_fn(depth)
        self.lambda_q1 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_k1 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_q2 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.lambda_k2 = nn.Parameter(torch.randn(self.head_dim) * 0.1)
        self.subln = nn.RMSNorm(2 * self.head_dim, eps=1e-5, elementwise_affine=True)

    def forward(self, x):
        bsz, tgt_len, embed_dim = x.size()
        src_len = tgt_len
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)
        q = q.view(bsz, tgt_len, 2 * self.num_heads, self.head_dim)  # (B, T, 2H, d)
        k = k.view(bsz, src_len, 2 * self.num_heads, self.head_dim)  # (B, T, 2H, d)
        v = v.view(bsz, src_len, self.num_heads, 2 * self.head_dim)  # (B, T, H, 2d)
        q = q.transpose(1, 2)  # (B, 2H, T, d)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)  # (B, H, T, 2d)
        q *= self.scaling
        attn_weights = torch.matmul(q, k.transpose(-1, -2))  # (B, 2H, T, T)
        attn_mask = torch.triu(torch.zeros([tgt_len, src_len]).float().fill_(float("-inf")).type_as(attn_weights), 1)
        attn_weights = torch.nan_to_num(attn_weights)
        attn_weights += attn_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(attn_weights)
        lambda_1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1).float()).type_as(q)
        lambda_2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1).float()).type_as(q)
        lambda_full = lambda_1 - lambda_2 + self.lambda_init
        if self.bug == "pairs-mixed":
            attn_weights = attn_weights.view(bsz, 2, self.num_heads, tgt_len, src_len).transpose(1, 2)  # bug
        else:
            attn_weights = attn_weights.view(bsz, self.num_heads, 2, tgt_len, src_len)  # (B, H, 2, T, T)
        attn_weights = attn_weights[:, :, 0] - lambda_full * attn_weights[:, :, 1]  # (B, H, T, T)
        attn = torch.matmul(attn_weights, v)  # (B, H, T, 2d)
        attn = self.subln(attn)
        attn = attn * (1 - self.lambda_init)
        if self.bug == "no-transpose":
            attn = attn.reshape(bsz, tgt_len, self.num_heads * 2 * self.head_dim)  # bug
        else:
            attn = attn.transpose(1, 2).reshape(bsz, tgt_len, self.num_heads * 2 * self.head_dim)  # (B, T, D)
        return self.out_proj(attn)


def build(bug="", B=2, T=6, D=48, H=3):
    """--dims B=2,T=6,D=48,H=3 (2H = 6 half-heads of 8 features; values 3 heads of 16)."""
    torch.manual_seed(0)
    return MultiheadDiffAttn(D, depth=1, num_heads=H, bug=bug).eval(), (torch.randn(B, T, D),)


if __name__ == "__main__":
    model, inputs = build(*sys.argv[1:2])
    with torch.no_grad():
        model(*inputs)
