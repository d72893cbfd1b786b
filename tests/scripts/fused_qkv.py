"""nanoGPT-style fused qkv projection, split with split() and view() (used by tests/engine/test_thirdparty.py)."""

import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()                                                   # (B, T, D)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                   # 3 x (B, T, D)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)      # (B, H, T, d_k)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)      # (B, H, T, d_k)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)      # (B, H, T, d_k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))     # (B, H, T, T)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))               # (T, T)
        att = att.masked_fill(~mask, float("-inf"))                          # (B, H, T, T)
        att = F.softmax(att, dim=-1)                                         # (B, H, T, T)
        y = att @ v                                                          # (B, H, T, d_k)
        y = y.transpose(1, 2).contiguous().view(B, T, C)                     # (B, T, D)
        return self.c_proj(y)                                                # (B, T, D)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(CausalSelfAttention(512, 8)(torch.randn(2, 6, 512)).shape)
